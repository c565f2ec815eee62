"""Admin-only: API keys (create, list, revoke) and the audit log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from ...domain.auth import Role
from ...domain.errors import InvalidRequestError
from ..audit import AuditDep
from ..deps import AdminDep, ApiKeysDep, AuditTrailDep, KnowledgeBasesDep, principal
from ..schemas import ERROR_RESPONSES, Name

router = APIRouter(prefix="/api", tags=["admin"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


class ScopeIn(BaseModel):
    knowledge_base_id: UUID
    role: Role


class KeyIn(BaseModel):
    name: Name = Field(default="", max_length=200)
    admin: bool = False
    scopes: list[ScopeIn] = Field(default_factory=list, max_length=1000)
    expires_at: datetime | None = None


class KeyOut(BaseModel):
    id: UUID
    prefix: str
    name: str
    is_admin: bool
    scopes: list[dict[str, Any]]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class NewKeyOut(BaseModel):
    key: str = Field(description="shown once: store it now, it cannot be read again")
    record: KeyOut


class KeyList(BaseModel):
    items: list[KeyOut]
    next_cursor: str | None = None


class AuditEntry(BaseModel):
    id: int
    at: datetime
    key_prefix: str
    action: str
    knowledge_base_id: UUID | None
    document_id: UUID | None
    detail: dict[str, Any]


class AuditList(BaseModel):
    items: list[AuditEntry]
    next_cursor: str | None


@router.post("/keys", status_code=201, response_model=NewKeyOut)
async def create_key(body: KeyIn, knowledge_bases: KnowledgeBasesDep, api_keys: ApiKeysDep, _: AdminDep,
                     audit: AuditDep) -> NewKeyOut:
    if body.admin == bool(body.scopes):
        raise InvalidRequestError("a key is either admin or scoped to knowledge bases: give one of them")
    if body.expires_at is not None and body.expires_at.astimezone(UTC) <= datetime.now(UTC):
        raise InvalidRequestError("expires_at is in the past")
    for scope in body.scopes:
        await knowledge_bases.get(scope.knowledge_base_id)  # 404 for an unknown knowledge base
    key, record = await api_keys.create_with_record(
        is_admin=body.admin, scopes={s.knowledge_base_id: s.role for s in body.scopes}, name=body.name,
        expires_at=body.expires_at)
    await audit.record("key.create", prefix=record["prefix"], admin=body.admin)
    return NewKeyOut(key=key, record=KeyOut(**record))


@router.get("/keys", response_model=KeyList)
async def list_keys(api_keys: ApiKeysDep, _: AdminDep) -> KeyList:
    return KeyList(items=[KeyOut(**r) for r in await api_keys.list()])


@router.delete("/keys/{key_id}", response_model=KeyOut)
async def revoke_key(key_id: Annotated[str, Path(max_length=64)], api_keys: ApiKeysDep, _: AdminDep,
                     audit: AuditDep) -> KeyOut:
    """Revoke by id or prefix; effective on the key's next request."""
    record = await api_keys.revoke(key_id)
    await audit.record("key.revoke", prefix=record["prefix"])
    return KeyOut(**record)


@router.get("/audit", response_model=AuditList)
async def read_audit_log(trail: AuditTrailDep, _: AdminDep,
                         limit: Annotated[int, Query(ge=1, le=500)] = 100,
                         cursor: Annotated[str | None, Query(max_length=20, pattern=r"^\d+$")] = None,
                         knowledge_base_id: UUID | None = None) -> AuditList:
    rows = await trail.list(limit=limit + 1, before_id=int(cursor) if cursor else None,
                            knowledge_base_id=knowledge_base_id)
    items = [AuditEntry.model_validate({name: r[name] for name in AuditEntry.model_fields}) for r in rows[:limit]]
    return AuditList(items=items, next_cursor=str(items[-1].id) if len(rows) > limit else None)

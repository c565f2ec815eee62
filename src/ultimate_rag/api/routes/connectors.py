"""Connectors of a knowledge base (SPEC §9): create, list, read (with the last syncs), change,
delete, request a sync (202) and abort the running one. Reading needs a reader of the knowledge
base, changing an editor; ``directory`` and ``s3`` connectors read with the server's own access and
need an admin key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from ...domain.auth import Principal
from ...domain.connectors import Connector, Sync
from ...domain.errors import ConflictError, InvalidRequestError
from ...domain.redact import redact_config, redact_text, restore_secrets
from ...services.connectors.base import ADMIN_KINDS
from ...services.connectors.runner import ConnectorServices
from ...services.connectors.sources import validate_config
from ..audit import AuditDep, Auditor
from ..deps import ConnectorsDep, EditableKB, PrincipalDep, ReadableKB, principal
from ..schemas import ERROR_RESPONSES, Name

router = APIRouter(prefix="/api/knowledge-bases/{kb_id}/connectors", tags=["connectors"],
                   dependencies=[Depends(principal)], responses=ERROR_RESPONSES)
Kind = Literal["urls", "sitemap", "s3", "directory"]
MAX_SCHEDULE = 366 * 86400


class ConnectorIn(BaseModel):
    kind: Kind
    name: Name = Field(default="", max_length=200)
    config: dict[str, Any]
    schedule_seconds: int | None = Field(default=None, ge=1, le=MAX_SCHEDULE)


class ConnectorPatch(BaseModel):
    name: Name | None = Field(default=None, max_length=200)
    config: dict[str, Any] | None = None
    schedule_seconds: int | None = Field(default=None, ge=1, le=MAX_SCHEDULE)


# The answers carry the rows' fields, declared once on the rows (Sync, Connector), with the counts
# completed and the credentials redacted. No docstring: it would become the schema's description.
class SyncOut(BaseModel, Sync, frozen=True):
    @classmethod
    def of(cls, s: Sync) -> SyncOut:
        counts = {k: 0 for k in ("discovered", "new", "updated", "unchanged", "removed", "failed", "skipped_active")}
        return cls(id=s.id, connector_id=s.connector_id, trigger=s.trigger, status=s.status, attempts=s.attempts,
                   max_attempts=s.max_attempts, counts=counts | {k: int(v) for k, v in s.counts.items()},
                   errors=redact_config(s.errors), error=redact_text(s.error), created_at=s.created_at,
                   started_at=s.started_at, finished_at=s.finished_at)


class SyncList(BaseModel):
    items: list[SyncOut]


class ConnectorOut(BaseModel, Connector, frozen=True):
    syncs: list[SyncOut] | None = None  # the latest first (GET one)

    @classmethod
    def of(cls, c: Connector, who: Principal, syncs: list[Sync] | None = None) -> ConnectorOut:
        """The configuration as stored for an admin; for every other key without credentials (URL
        userinfo, secret query parameters and fields): sending it back keeps the stored ones."""
        config = c.config if who.is_admin else redact_config(c.config)
        return cls(id=c.id, knowledge_base_id=c.knowledge_base_id, kind=c.kind, name=c.name, config=config,
                   schedule_seconds=c.schedule_seconds, next_sync_at=c.next_sync_at, created_at=c.created_at,
                   updated_at=c.updated_at, syncs=None if syncs is None else [SyncOut.of(s) for s in syncs])


class ConnectorList(BaseModel):
    items: list[ConnectorOut]


def _may_use(kind: str, who: Principal) -> None:
    if kind in ADMIN_KINDS and not who.is_admin:
        from fastapi import HTTPException

        raise HTTPException(status_code=403, detail=f"{kind} connectors read with the server's access: admin only")


def _schedule(value: int | None, services: ConnectorServices) -> int | None:
    if value is not None and value < services.min_schedule_seconds:
        raise InvalidRequestError(f"schedule_seconds must be at least {services.min_schedule_seconds}")
    return value


@router.post("", status_code=201, response_model=ConnectorOut)
async def create_connector(kb: EditableKB, body: ConnectorIn, services: ConnectorsDep, who: PrincipalDep,
                           audit: AuditDep) -> ConnectorOut:
    _may_use(body.kind, who)
    if kb.deleting:
        raise ConflictError("knowledge base is being deleted")
    config = validate_config(body.kind, body.config, services.limits)
    connector = await services.repository.create(kb.id, kind=body.kind, name=body.name, config=config,
                                                 schedule_seconds=_schedule(body.schedule_seconds, services),
                                                 max_per_knowledge_base=services.max_per_knowledge_base)
    await audit.record("connector.create", knowledge_base_id=kb.id, connector_id=connector.id, kind=connector.kind,
                       schedule_seconds=connector.schedule_seconds)
    return ConnectorOut.of(connector, who)


@router.get("", response_model=ConnectorList)
async def list_connectors(kb: ReadableKB, services: ConnectorsDep, who: PrincipalDep) -> ConnectorList:
    return ConnectorList(items=[ConnectorOut.of(c, who) for c in await services.repository.list(kb.id)])


@router.get("/{connector_id}", response_model=ConnectorOut)
async def get_connector(kb: ReadableKB, connector_id: UUID, services: ConnectorsDep, who: PrincipalDep) -> ConnectorOut:
    connector = await services.repository.get(kb.id, connector_id)
    return ConnectorOut.of(connector, who, await services.repository.syncs(connector.id, limit=10))


@router.patch("/{connector_id}", response_model=ConnectorOut)
async def update_connector(kb: EditableKB, connector_id: UUID, body: ConnectorPatch, services: ConnectorsDep,
                           who: PrincipalDep, audit: AuditDep) -> ConnectorOut:
    connector = await services.repository.get(kb.id, connector_id)
    _may_use(connector.kind, who)
    config = None
    if body.config is not None:  # a redacted configuration sent back keeps the stored credentials
        config = validate_config(connector.kind, restore_secrets(body.config, connector.config), services.limits)
    given = "schedule_seconds" in body.model_fields_set
    updated = await services.repository.update(
        kb.id, connector_id, name=body.name, config=config,
        schedule_seconds=_schedule(body.schedule_seconds, services) if given else None, schedule_given=given)
    await audit.record("connector.update", knowledge_base_id=kb.id, connector_id=connector_id,
                       fields=",".join(sorted(body.model_fields_set)))
    return ConnectorOut.of(updated, who)


@router.delete("/{connector_id}", status_code=204, response_class=Response)
async def delete_connector(kb: EditableKB, connector_id: UUID, services: ConnectorsDep, who: PrincipalDep,
                           audit: AuditDep) -> Response:
    """Aborts its sync (documents still being fetched become FAILED) and removes the connector and its
    history; the documents it brought in stay in the knowledge base."""
    connector = await services.repository.get(kb.id, connector_id)
    _may_use(connector.kind, who)
    aborted = await services.repository.delete(kb.id, connector_id)
    await audit.record("connector.delete", knowledge_base_id=kb.id, connector_id=connector_id,
                       aborted_sync=aborted.id if aborted else None)
    return Response(status_code=204)


@router.post("/{connector_id}/sync", status_code=202, response_model=SyncOut)
async def sync_connector(kb: EditableKB, connector_id: UUID, services: ConnectorsDep, who: PrincipalDep,
                         audit: AuditDep) -> SyncOut:
    """Queue a sync; a worker runs it. 409 while one is queued or running."""
    return await _act_on_sync(kb.id, connector_id, services, who, audit, "connector.sync",
                              services.repository.request_sync)


@router.post("/{connector_id}/abort", response_model=SyncOut)
async def abort_connector(kb: EditableKB, connector_id: UUID, services: ConnectorsDep, who: PrincipalDep,
                          audit: AuditDep) -> SyncOut:
    """Abort the queued or running sync: the worker running it stops at its next write, and every
    document it was fetching becomes FAILED ("connector sync aborted"). 409 when none is active.
    ``directory`` and ``s3`` connectors are admin only, as for every other change."""
    return await _act_on_sync(kb.id, connector_id, services, who, audit, "connector.abort", services.repository.abort)


async def _act_on_sync(kb_id: UUID, connector_id: UUID, services: ConnectorServices, who: Principal, audit: Auditor,
                       event: str, act: Callable[[UUID, UUID], Awaitable[Sync]]) -> SyncOut:
    connector = await services.repository.get(kb_id, connector_id)
    _may_use(connector.kind, who)
    sync = await act(kb_id, connector_id)
    await audit.record(event, knowledge_base_id=kb_id, connector_id=connector_id, sync_id=sync.id)
    return SyncOut.of(sync)


@router.get("/{connector_id}/syncs", response_model=SyncList)
async def list_syncs(kb: ReadableKB, connector_id: UUID, services: ConnectorsDep,
                     limit: Annotated[int, Query(ge=1, le=200)] = 20) -> SyncList:
    connector = await services.repository.get(kb.id, connector_id)
    return SyncList(items=[SyncOut.of(s) for s in await services.repository.syncs(connector.id, limit=limit)])

"""Operator views across knowledge bases (admin only): documents that have sat in an active
status for too long. Registered before the documents router, whose ``/{document_id}`` would
otherwise take ``/stuck`` for an id."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query
from pydantic import BaseModel

from ..deps import AdminDep, OperationsDep, SettingsDep
from ..schemas import ERROR_RESPONSES

router = APIRouter(prefix="/api/documents", tags=["operations"], responses=ERROR_RESPONSES)
MAX_LIMIT = 500


class StuckDocument(BaseModel):
    id: UUID
    knowledge_base_id: UUID
    filename: str
    status: str
    updated_at: datetime
    seconds_in_status: float  # since the document last changed (a stage, progress, a retry)
    attempts: int
    locked_by: str | None


class StuckDocumentList(BaseModel):
    items: list[StuckDocument]


@router.get("/stuck", response_model=StuckDocumentList)
async def stuck_documents(
    _admin: AdminDep, settings: SettingsDep, operations: OperationsDep,
    older_than_seconds: Annotated[float | None, Query(ge=0, le=10 * 365 * 86400,
                                                      description="default: ULTIMATE_RAG_STUCK_AFTER_SECONDS")]
    = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
) -> StuckDocumentList:
    """Documents in an active status for longer than ``older_than_seconds`` that nothing is moving:
    running with no heartbeat for that long, due while no worker is busy, or an upload or fetch that
    never finished; the longest-waiting first. A healthy backlog (queued behind busy workers) is not
    stuck. A worker that died is reclaimed automatically after its lease; ``/fail`` or ``/recover``
    act on what is left."""
    threshold = settings.stuck_after_seconds if older_than_seconds is None else older_than_seconds
    rows = await operations.stuck_documents(threshold, limit, settings.lease_seconds)
    return StuckDocumentList(items=[StuckDocument(**row) for row in rows])

"""Connectors and their syncs (SPEC §9), as the services and the API see them: a connector's
configuration, one sync of it, the lease a worker holds on a running sync, and what PostgreSQL
knows about the document of one remote item."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from .errors import ConflictError
from .status import DocumentStatus


class KnowledgeBaseDeletingError(ConflictError):
    """The knowledge base is being deleted: its connectors' syncs stop."""


@dataclass(frozen=True)
class Connector:
    id: UUID
    knowledge_base_id: UUID
    kind: str
    name: str
    config: dict[str, Any]
    schedule_seconds: int | None
    next_sync_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Sync:
    id: UUID
    connector_id: UUID
    trigger: str
    status: str
    attempts: int
    max_attempts: int
    counts: dict[str, int]
    errors: list[dict[str, Any]]
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class SyncLease:
    sync_id: UUID
    connector_id: UUID
    knowledge_base_id: UUID
    worker_id: str
    attempt: int
    max_attempts: int


@dataclass(frozen=True)
class ItemState:
    """What PostgreSQL knows about one remote item's document."""

    id: UUID
    status: DocumentStatus
    sha256: str
    object_key: str
    content_revision: int
    remote_etag: str | None
    remote_last_modified: str | None
    connector_sync_id: UUID | None
    filename: str

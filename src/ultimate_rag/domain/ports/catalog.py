"""What the API (routes, the MCP endpoint) reads and writes besides the services: knowledge bases,
documents as listed and shown, API keys, the audit log, the operations read-outs, and the live
document events."""

from __future__ import annotations

import asyncio
import builtins
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from ..auth import Principal, Role
from ..models import Chunk, Document, DocumentAsset, KnowledgeBase, KnowledgeBaseSettings
from ..status import DocumentStatus


class KnowledgeBaseStore(Protocol):
    async def create(self, name: str, description: str, settings: KnowledgeBaseSettings) -> KnowledgeBase: ...
    async def get(self, kb_id: UUID) -> KnowledgeBase: ...
    async def list(self) -> builtins.list[KnowledgeBase]: ...
    async def status_counts(self, kb_id: UUID) -> dict[str, int]: ...
    async def status_counts_of(self, kb_ids: builtins.list[UUID]) -> dict[UUID, dict[str, int]]:
        """Documents per status of each knowledge base (every one given has an entry)."""
        ...


class DocumentCatalog(Protocol):
    async def get(self, document_id: UUID) -> Document: ...
    async def list(self, knowledge_base_id: UUID, *, status: DocumentStatus | None, limit: int, cursor: str | None,
                   filename_contains: str | None = None) -> tuple[builtins.list[Document], str | None]:
        """Newest first, a page at a time (``cursor``: where the last page ended)."""
        ...
    async def chunks(self, document_id: UUID, *, after_ordinal: int = -1,
                     limit: int | None = None) -> builtins.list[Chunk]: ...
    async def assets(self, document_id: UUID) -> builtins.list[DocumentAsset]: ...
    async def update_metadata(self, document_id: UUID, patch: dict[str, Any]) -> Document:
        """A JSON Merge Patch of the document's own fields (``MetadataError`` naming the field)."""
        ...
    async def job_history(self, document_id: UUID) -> builtins.list[dict[str, Any]]: ...


class ApiKeyStore(Protocol):
    async def create(self, *, is_admin: bool, scopes: dict[UUID, Role], name: str = "",
                     expires_at: datetime | None = None) -> str: ...
    async def create_with_record(self, *, is_admin: bool, scopes: dict[UUID, Role], name: str = "",
                                 expires_at: datetime | None = None) -> tuple[str, dict[str, Any]]: ...
    async def list(self) -> builtins.list[dict[str, Any]]: ...
    async def revoke(self, key_id_or_prefix: str) -> dict[str, Any]: ...
    async def authenticate(self, key: str) -> Principal | None:
        """The key's principal (None: no such key, revoked or expired; a key the database cannot
        even compare is no key either)."""
        ...
    async def is_valid(self, prefix: str) -> bool: ...


class AuditTrail(Protocol):
    async def record(self, *, key_prefix: str, action: str, knowledge_base_id: UUID | None = None,
                     document_id: UUID | None = None, detail: dict[str, Any] | None = None) -> None: ...
    async def list(self, *, limit: int, before_id: int | None = None,
                   knowledge_base_id: UUID | None = None) -> builtins.list[dict[str, Any]]: ...


class OperationsReadout(Protocol):
    """The gauges /metrics reads from PostgreSQL at scrape time, and the stuck-document listing."""

    async def document_metrics(self, stuck_after_seconds: float,
                               lease_seconds: float) -> builtins.list[dict[str, Any]]: ...
    async def job_metrics(self) -> builtins.list[dict[str, Any]]: ...
    async def stuck_documents(self, older_than_seconds: float, limit: int,
                              lease_seconds: float) -> builtins.list[dict[str, Any]]: ...


class EventSubscription(Protocol):
    """One listener's document changes in one knowledge base; ``overflowed`` or a ``lost`` event:
    it missed some, and should resync."""

    @property
    def queue(self) -> asyncio.Queue[dict[str, Any]]: ...
    @property
    def overflowed(self) -> bool: ...


class DocumentEvents(Protocol):
    def subscribe(self, knowledge_base_id: UUID) -> AbstractAsyncContextManager[EventSubscription]:
        """``EventsUnavailable`` (domain/errors.py) when listening is not possible now: poll instead."""
        ...

"""The document lifecycle's database side (services/lifecycle.py, knowledge_base_deletion.py,
ingestion.py): documents locked with their job for an operation, the bulk queue, a knowledge
base's deletion, and the submit's one-transaction intake."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from ..models import Document, KnowledgeBase
from ..status import DocumentStatus, JobOperation, JobStatus


@dataclass(frozen=True)
class LockedDocument:
    """A document as read under its job's and its own row lock. ``upload_*``: the re-upload holding
    it (its token, and the status and error message to restore if its bytes never commit); ``job_*``:
    its single job's status, operation and force flag."""

    status: DocumentStatus
    knowledge_base_id: UUID
    object_key: str
    content_revision: int
    upload_token: str | None = None
    upload_restore_status: str | None = None
    upload_restore_error: str | None = None
    job_status: JobStatus | None = None  # its single job: queued (PENDING), taken by a worker (RUNNING), ...
    job_operation: JobOperation | None = None
    job_force: bool = False


class LifecycleSession(Protocol):
    """One document's job and row, locked (job first), in one transaction: the writes an operation
    makes once the service has decided it. ``document`` follows the writes (its status is current)."""

    document: LockedDocument

    async def queue(self, operation: JobOperation, *, force: bool, new_revision: bool = False) -> None:
        """The single job queued again (PENDING); a delete unpublishes at once, a rebuild
        (``new_revision``) is a new content revision built beside the published one."""
    async def cancel(self, message: str) -> None:
        """Job and document FAILED with ``message``; a worker still on it loses its lease."""
    async def begin_upload(self, token: str) -> None: ...
    async def record_upload(self, *, object_key: str, filename: str, mime_type: str, size_bytes: int,
                            sha256: str, revision: int) -> None: ...
    async def restore_upload(self, status: DocumentStatus, error_message: str | None) -> None: ...


class KnowledgeBaseDeletionStore(Protocol):
    """What removing a whole knowledge base needs from the database (services/knowledge_base_deletion.py)."""

    async def mark_deleting(self, knowledge_base_id: UUID) -> None: ...
    async def queue_document_deletes(self, knowledge_base_id: UUID, batch_size: int = 1000) -> int: ...
    async def drop_if_empty(self, knowledge_base_id: UUID, remove_leftovers: Callable[[], Awaitable[None]]) -> bool:
        """Delete the knowledge base row once it owns no document; ``remove_leftovers`` runs
        first, under the row lock."""


class LifecycleStore(Protocol):
    def locked(self, document_id: UUID) -> AbstractAsyncContextManager[LifecycleSession]:
        """``ResourceNotFoundError`` when the document (or its job) does not exist."""
        ...

    async def bulk_queue(self, knowledge_base_id: UUID, *, statuses: frozenset[DocumentStatus],
                         accepted: frozenset[DocumentStatus], current_parsers: list[str] | None,
                         batch_size: int = 1000) -> tuple[int, int]:
        """Queue (a rebuild) every document of the knowledge base in ``statuses`` and ``accepted``,
        whose parser is not current; returns (queued, skipped: not ``accepted``)."""
        ...

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None: ...


class DocumentReader(Protocol):
    async def get(self, document_id: UUID) -> Document: ...
    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]: ...


class KnowledgeBaseReader(Protocol):
    async def get(self, knowledge_base_id: UUID) -> KnowledgeBase: ...


class DocumentIntake(Protocol):
    """Creates a document and its queued job in one transaction (the submit's commit), with the
    upload's audit entry when ``uploaded_by`` (an API key's prefix) is given."""

    async def create_with_job(self, *, document_id: UUID, knowledge_base_id: UUID, filename: str, mime_type: str,
                              size_bytes: int, sha256: str, object_key: str, max_attempts: int,
                              source: dict[str, Any] | None = None, uploaded_by: str | None = None,
                              metadata: dict[str, Any] | None = None) -> Document: ...

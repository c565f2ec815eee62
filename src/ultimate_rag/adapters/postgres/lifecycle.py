"""Operator and user operations on documents (SPEC §6), the storage side: the service
(services/lifecycle.py) decides from domain/operations.py which operation a status accepts; this
repository locks and writes. ``locked`` takes the job row, then the document row (the lock order
used everywhere), and every write it offers changes the document and its single job in that one
transaction, so of many concurrent calls exactly one wins. Each status write is checked against
the transition tables: single rows in Python under the lock, batches in SQL with the sources as
parameters (``queue_batch_params``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

from ...domain.errors import ResourceNotFoundError
from ...domain.ports import LockedDocument
from ...domain.status import (
    STABLE,
    DocumentStatus,
    JobOperation,
    JobStatus,
    check_transition,
    job_sources_of,
    names,
    sources_of,
)
from .database import Connection, Database
from .documents import NOTIFY_CHANNEL, notify_workers, reset_job
from .queue import STILL_SERVED, drop_unpublished
from .sql import load_queries

Q = load_queries("lifecycle.sql")
# the job statuses an operator's fail may end a job from (the job table): what cancel_job passes
CANCEL_JOB_SOURCES = names(job_sources_of(JobStatus.FAILED))


async def lock_document(conn: Connection, document_id: UUID) -> LockedDocument:
    """The document's job row, then its row, locked in this transaction."""
    job = await (await conn.execute(Q["lock_job"], {"id": document_id})).fetchone()
    doc = await (await conn.execute(Q["lock_document"], {"id": document_id})).fetchone()
    if job is None or doc is None:
        raise ResourceNotFoundError("document not found")
    lease = doc["upload_lease"] or {}
    return LockedDocument(DocumentStatus(doc["status"]), doc["knowledge_base_id"], doc["object_key"],
                          doc["content_revision"], upload_token=lease.get("token"),
                          upload_restore_status=lease.get("status"), upload_restore_error=lease.get("error_message"),
                          job_status=JobStatus(job["status"]), job_operation=JobOperation(job["operation"]),
                          job_force=bool(job["force"]))


class LockedSession:
    """The writes on one locked document (``domain.ports.LifecycleSession``)."""

    def __init__(self, conn: Connection, document_id: UUID, document: LockedDocument, *, max_attempts: int,
                 upload_lease_seconds: float) -> None:
        self._conn = conn
        self._id = document_id
        self.document = document
        self._max_attempts = max_attempts
        self._upload_lease_seconds = upload_lease_seconds

    def _moved(self, status: DocumentStatus) -> None:
        self.document = replace(self.document, status=status)

    async def queue(self, operation: JobOperation, *, force: bool, new_revision: bool = False) -> None:
        self._moved(check_transition(self.document.status, DocumentStatus.PENDING))
        await reset_job(self._conn, self._id, operation=operation.value, force=force, max_attempts=self._max_attempts)
        await self._conn.execute(Q["queue_document"], {"operation": operation.value, "bump": new_revision,
                                                       "id": self._id})
        await notify_workers(self._conn)

    async def cancel(self, message: str) -> None:
        self._moved(check_transition(self.document.status, DocumentStatus.FAILED))
        await self._conn.execute(Q["cancel_job"], {"message": message, "id": self._id, "job_from": CANCEL_JOB_SOURCES})
        await drop_unpublished(self._conn, self._id)  # a cancelled rebuild: the published revision keeps serving
        await self._conn.execute(Q["cancel_document"], {"message": message, "still_served": STILL_SERVED,
                                                        "id": self._id})

    async def begin_upload(self, token: str) -> None:
        self._moved(check_transition(self.document.status, DocumentStatus.UPLOADING))
        await self._conn.execute(Q["begin_upload"], {"lease": self._upload_lease_seconds, "token": token,
                                                     "id": self._id})

    async def record_upload(self, *, object_key: str, filename: str, mime_type: str, size_bytes: int,
                            sha256: str, revision: int) -> None:
        await self._conn.execute(Q["record_upload"], {
            "object_key": object_key, "filename": filename, "mime_type": mime_type, "size_bytes": size_bytes,
            "sha256": sha256, "revision": revision, "id": self._id})

    async def restore_upload(self, status: DocumentStatus, error_message: str | None) -> None:
        self._moved(check_transition(self.document.status, status))
        await self._conn.execute(Q["restore_upload"], {"status": status.value, "error_message": error_message,
                                                       "id": self._id})


def queue_batch_params(knowledge_base_id: UUID, *, operation: JobOperation, force: bool, new_revision: bool,
                       statuses: frozenset[DocumentStatus], accepted: frozenset[DocumentStatus],
                       current_parsers: list[str] | None, max_attempts: int,
                       started: datetime | None = None) -> dict[str, Any]:
    """``queue_batch``'s parameters (all but the batch position): the sources of both moves to
    PENDING come from the transition tables."""
    return {"kb": knowledge_base_id, "operation": operation.value, "force": force, "bump": new_revision,
            "statuses": names(statuses), "accepted": names(accepted),
            "from_statuses": names(sources_of(DocumentStatus.PENDING)),
            "job_from": names(job_sources_of(JobStatus.PENDING)), "parsers": current_parsers,
            "max_attempts": max_attempts, "started": started, "jobs_channel": NOTIFY_CHANNEL}


async def queue_in_batches(db: Database, params: dict[str, Any], batch_size: int) -> tuple[int, int]:
    """Run ``queue_batch`` over the knowledge base by id, one statement and one short transaction
    per batch. Returns (queued, skipped)."""
    queued = skipped = 0
    after = UUID(int=0)
    while True:
        row = await db.fetchone(Q["queue_batch"], {**params, "after": after, "n": batch_size})
        if row is None or row["last_id"] is None:
            return queued, skipped
        queued += row["queued"]
        skipped += row["skipped"]
        after = row["last_id"]


class LifecycleRepository:
    """``domain.ports.LifecycleStore`` on PostgreSQL."""

    def __init__(self, db: Database, *, max_attempts: int, upload_lease_seconds: float = 600.0) -> None:
        self._db = db
        self._max_attempts = max_attempts
        self._upload_lease_seconds = upload_lease_seconds

    @asynccontextmanager
    async def locked(self, document_id: UUID) -> AsyncIterator[LockedSession]:
        async with self._db.transaction() as conn:
            document = await lock_document(conn, document_id)
            yield LockedSession(conn, document_id, document, max_attempts=self._max_attempts,
                                upload_lease_seconds=self._upload_lease_seconds)

    async def bulk_queue(self, knowledge_base_id: UUID, *, statuses: frozenset[DocumentStatus],
                         accepted: frozenset[DocumentStatus], current_parsers: list[str] | None,
                         batch_size: int = 1000) -> tuple[int, int]:
        """A rolling rebuild: each document a new revision built beside its published one, marked
        with the knowledge base's new ``rebuild_started_at`` (see ``rebuild_progress``)."""
        started = await self._db.fetchone(Q["start_rebuild"], {"kb": knowledge_base_id})
        stamp = started["rebuild_started_at"] if started else None
        params = queue_batch_params(
            knowledge_base_id, operation=JobOperation.INGEST, force=False, new_revision=True, statuses=statuses,
            accepted=accepted, current_parsers=current_parsers, max_attempts=self._max_attempts, started=stamp)
        counts = await queue_in_batches(self._db, params, batch_size)
        await self._db.execute(Q["queued_rebuild"], {"kb": knowledge_base_id, "started": stamp})
        return counts

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None:
        """The last bulk reindex of the knowledge base: when it started and, of the documents it
        queued, how many are rebuilt (READY), pending (still in the pipeline), failed (their previous
        revision, if any, still serving) and removed since (deleted or OUTDATED); None if none ran."""
        return await self._db.fetchone(Q["rebuild_progress"], {"kb": knowledge_base_id, "stable": names(STABLE)})


class KnowledgeBaseDeletionRepository:
    """Deleting a knowledge base: flag it (uploads get 409 from then on), turn every one of its
    documents into a hard-delete job in batches, and drop the knowledge base row once the workers
    have removed the last document."""

    def __init__(self, db: Database, *, max_attempts: int) -> None:
        self._db = db
        self._max_attempts = max_attempts

    async def mark_deleting(self, knowledge_base_id: UUID) -> None:
        if await self._db.fetchone(Q["mark_kb_deleting"], {"kb": knowledge_base_id}) is None:
            raise ResourceNotFoundError("knowledge base not found")

    async def queue_document_deletes(self, knowledge_base_id: UUID, batch_size: int = 1000) -> int:
        """Every document, whatever its status, goes to PENDING with a hard-delete job (each status
        may move to PENDING, SPEC §4); a worker still on one loses its lease. Idempotent: calling it
        again (after a crash half-way) finishes the work."""
        every = frozenset(DocumentStatus)
        params = queue_batch_params(knowledge_base_id, operation=JobOperation.DELETE, force=True, new_revision=False,
                                    statuses=every, accepted=every, current_parsers=None,
                                    max_attempts=self._max_attempts)
        queued, _ = await queue_in_batches(self._db, params, batch_size)
        return queued

    async def drop_if_empty(self, knowledge_base_id: UUID, remove_leftovers: Callable[[], Awaitable[None]]) -> bool:
        """Delete the knowledge base row once it owns no document; ``remove_leftovers`` (vectors,
        objects, snapshots of the whole knowledge base) runs first, under the row lock."""
        kb = {"kb": knowledge_base_id}
        async with self._db.transaction() as conn:
            if await (await conn.execute(Q["lock_deleting_kb"], kb)).fetchone() is None:
                return False
            left = await (await conn.execute(Q["kb_has_documents"], kb)).fetchone()
            if left and left["any"]:
                return False
            async with self._db.kept_open(conn):
                await remove_leftovers()
            await conn.execute(Q["delete_kb"], kb)
            return True

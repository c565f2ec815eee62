"""Operator and user operations on one document, decided under row locks (SPEC §6): reindex,
delete, fail, recover, re-upload, and bulk reindex. Each locks the job row, then the document row
(the lock order used everywhere), checks the 409 rule and the transition table, and changes the
document and its single job in the same transaction, so of many concurrent calls exactly one wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from ...domain.errors import ConflictError, ResourceNotFoundError
from ...domain.status import (
    RESTORABLE_FROM_UPLOAD,
    RUNNING,
    STABLE,
    DocumentStatus,
    check_transition,
    is_active,
)
from .database import Connection, Database
from .documents import NOTIFY_CHANNEL, notify_workers, reset_job
from .queue import STILL_SERVED, drop_unpublished

CANCELLED = "cancelled by operator"
# SQL (in a statement with %(bump)s): a rebuild of a document with a published revision is a new
# revision, built beside the published one; with nothing published (never READY, deleted, OUTDATED)
# there is nothing to keep beside, and the revision (so the chunk ids) stays the same
NEW_REVISION = "CASE WHEN %(bump)s AND published_revision IS NOT NULL THEN 1 ELSE 0 END"


@dataclass(frozen=True)
class Locked:
    status: DocumentStatus
    knowledge_base_id: UUID
    object_key: str
    content_revision: int


async def lock_document(conn: Connection, document_id: UUID) -> Locked:
    job = await (await conn.execute(
        "SELECT id FROM ingestion_jobs WHERE document_id = %s FOR UPDATE", (document_id,))).fetchone()
    doc = await (await conn.execute(
        "SELECT status, knowledge_base_id, object_key, content_revision FROM documents WHERE id = %s FOR UPDATE",
        (document_id,))).fetchone()
    if job is None or doc is None:
        raise ResourceNotFoundError("document not found")
    return Locked(DocumentStatus(doc["status"]), doc["knowledge_base_id"], doc["object_key"], doc["content_revision"])


async def _upload_lease(conn: Connection, document_id: UUID) -> dict[str, Any] | None:
    row = await (await conn.execute("SELECT upload_lease FROM documents WHERE id = %s", (document_id,))).fetchone()
    return row["upload_lease"] if row else None


async def _holds_upload(conn: Connection, document_id: UUID, token: UUID) -> bool:
    lease = await _upload_lease(conn, document_id)
    return lease is not None and lease.get("token") == str(token)


def refuse_if_active(locked: Locked) -> None:
    if is_active(locked.status):
        raise ConflictError(f"document is active ({locked.status}), try again later")


class LifecycleRepository:
    def __init__(self, db: Database, *, max_attempts: int, upload_lease_seconds: float = 600.0) -> None:
        self._db = db
        self._max_attempts = max_attempts
        self._upload_lease_seconds = upload_lease_seconds

    async def reindex(self, document_id: UUID) -> None:
        async with self._db.transaction() as conn:
            locked = await lock_document(conn, document_id)
            refuse_if_active(locked)
            await self._queue(conn, document_id, locked.status, operation="ingest", force=False, new_revision=True)

    async def delete(self, document_id: UUID, *, hard: bool) -> None:
        async with self._db.transaction() as conn:
            locked = await lock_document(conn, document_id)
            refuse_if_active(locked)
            if locked.status == DocumentStatus.DELETED and not hard:
                raise ConflictError("document is already deleted")
            await self._queue(conn, document_id, locked.status, operation="delete", force=hard)

    async def fail(self, document_id: UUID, *, then_reindex: bool = False) -> DocumentStatus:
        """End the job and fail the document; a worker still on it loses its lease (fencing).
        With ``then_reindex`` (recover) the document is queued again in the same transaction.
        Returns the status the document had under the row lock: the one the operation started from."""
        async with self._db.transaction() as conn:
            locked = await lock_document(conn, document_id)
            if locked.status == DocumentStatus.FETCHING:
                raise ConflictError("document is being fetched by a connector: abort the connector's sync instead")
            if then_reindex and locked.status not in RUNNING:
                raise ConflictError(f"only a running document can be recovered; this one is {locked.status}")
            if locked.status in STABLE:
                raise ConflictError(f"document is not active ({locked.status}); there is nothing to cancel")
            check_transition(locked.status, DocumentStatus.FAILED)
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'FAILED', locked_by = NULL, locked_at = NULL, finished_at = now(),"
                " updated_at = now(), last_error = %(e)s, error_history = error_history || jsonb_build_array("
                " jsonb_build_object('attempt', attempts, 'at', now(), 'error', %(e)s::text))"
                " WHERE document_id = %(id)s", {"e": CANCELLED, "id": document_id})
            await drop_unpublished(conn, document_id)  # a cancelled rebuild: the published revision keeps serving
            await conn.execute(
                "UPDATE documents SET status = 'FAILED', progress = '{}'::jsonb,"
                " error_message = %s || CASE WHEN published_revision IS NOT NULL"
                " THEN format(%s, published_revision) ELSE '' END,"
                " upload_expires_at = NULL, upload_lease = NULL, updated_at = now() WHERE id = %s",
                (CANCELLED, STILL_SERVED, document_id))
            if then_reindex:
                await self._queue(conn, document_id, DocumentStatus.FAILED, operation="ingest", force=True,
                                  new_revision=True)
            return locked.status

    async def begin_upload(self, document_id: UUID) -> tuple[Locked, UUID]:
        """Re-upload, step 1: a stable document becomes UPLOADING while its new bytes are stored,
        under a lease: ``upload_expires_at`` (now + the upload lease) and ``upload_lease`` (this
        upload's token and the status and error message to restore). Returns the token."""
        token = uuid4()
        async with self._db.transaction() as conn:
            locked = await lock_document(conn, document_id)
            refuse_if_active(locked)
            check_transition(locked.status, DocumentStatus.UPLOADING)
            await conn.execute(
                "UPDATE documents SET status = 'UPLOADING', error_message = NULL, progress = '{}'::jsonb,"
                " upload_expires_at = now() + make_interval(secs => %(lease)s),"
                " upload_lease = jsonb_build_object('token', %(token)s::text, 'status', status,"
                "   'error_message', error_message),"
                " updated_at = now() WHERE id = %(id)s",
                {"lease": self._upload_lease_seconds, "token": str(token), "id": document_id})
            return locked, token

    async def finish_upload(self, document_id: UUID, token: UUID, *, object_key: str, filename: str,
                            mime_type: str, size_bytes: int, sha256: str, revision: int) -> None:
        """Re-upload, step 2: record the new source and queue it (UPLOADING -> PENDING), only while
        this upload still holds the document (not failed by an operator, nor expired and restored)."""
        async with self._db.transaction() as conn:
            locked = await lock_document(conn, document_id)
            if locked.status != DocumentStatus.UPLOADING or not await _holds_upload(conn, document_id, token):
                raise ConflictError(f"the re-upload was cancelled (document is {locked.status})")
            await conn.execute(
                "UPDATE documents SET object_key = %s, filename = %s, mime_type = %s, size_bytes = %s, sha256 = %s,"
                " content_revision = %s, upload_expires_at = NULL, upload_lease = NULL WHERE id = %s",
                (object_key, filename, mime_type, size_bytes, sha256, revision, document_id))
            await self._queue(conn, document_id, locked.status, operation="ingest", force=False)

    async def abort_upload(self, document_id: UUID, token: UUID) -> DocumentStatus | None:
        """Compensation for a re-upload whose bytes were never recorded: the document goes back to
        the status (and error message) it had, with its previous revision, which was never touched.
        Returns the restored status, or None when this upload no longer holds the document."""
        async with self._db.transaction() as conn:
            locked = await lock_document(conn, document_id)
            if locked.status != DocumentStatus.UPLOADING:
                return None
            lease = await _upload_lease(conn, document_id)
            if lease is None or lease.get("token") != str(token):
                return None
            previous = DocumentStatus(lease.get("status") or DocumentStatus.FAILED)
            if previous not in RESTORABLE_FROM_UPLOAD:
                previous = DocumentStatus.FAILED
            check_transition(locked.status, previous)
            await conn.execute(
                "UPDATE documents SET status = %s, error_message = %s, upload_expires_at = NULL,"
                " upload_lease = NULL, updated_at = now() WHERE id = %s",
                (previous.value, lease.get("error_message"), document_id))
            return previous

    async def bulk_reindex(self, knowledge_base_id: UUID, *, statuses: list[str],
                           current_parsers: list[str] | None, batch_size: int = 1000) -> tuple[int, int]:
        """Queue every matching stable document of a knowledge base, in batches by id (one statement
        and one short transaction per batch): a rolling rebuild, each document a new revision built
        beside its published one. The documents queued are marked with the knowledge base's new
        ``rebuild_started_at`` (see ``rebuild_progress``). Returns (queued, skipped because active)."""
        queued = skipped = 0
        after = UUID(int=0)
        started = await self._db.fetchone(
            "UPDATE knowledge_bases SET rebuild_started_at = clock_timestamp() WHERE id = %s"
            " RETURNING rebuild_started_at", (knowledge_base_id,))
        while True:
            row: dict[str, Any] | None = await self._db.fetchone(BULK_REINDEX, {
                "kb": knowledge_base_id, "after": after, "n": batch_size, "statuses": statuses,
                "parsers": current_parsers, "max_attempts": self._max_attempts,
                "jobs_channel": NOTIFY_CHANNEL,
                "started": started["rebuild_started_at"] if started else None})
            if row is None or row["last_id"] is None:
                return queued, skipped
            queued += row["queued"]
            skipped += row["skipped"]
            after = row["last_id"]

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None:
        """The last bulk reindex of the knowledge base: when it started and, of the documents it
        queued, how many are rebuilt (READY), pending (still in the pipeline), failed (their previous
        revision, if any, still serving) and removed since (deleted or OUTDATED); None if none ran."""
        return await self._db.fetchone(REBUILD_PROGRESS, {"kb": knowledge_base_id})

    async def _queue(self, conn: Connection, document_id: UUID, current: DocumentStatus, *, operation: str,
                     force: bool, new_revision: bool = False) -> None:
        """Queue the document's job. A delete unpublishes at once (SPEC §4 rule 3); a rebuild
        (``new_revision``) is a new content revision, built beside the published one."""
        check_transition(current, DocumentStatus.PENDING)
        await reset_job(conn, document_id, operation=operation, force=force, max_attempts=self._max_attempts)
        await conn.execute(
            "UPDATE documents SET status = 'PENDING', progress = '{}'::jsonb, updated_at = now(),"
            " published_revision = CASE WHEN %(op)s = 'delete' THEN NULL ELSE published_revision END,"
            f" content_revision = content_revision + {NEW_REVISION},"
            # a reindexed OUTDATED document is not outdated again against the same twin (SPEC §8)
            " dedup_exempt = CASE WHEN status = 'OUTDATED' AND duplicate_of IS NOT NULL"
            "   THEN array_append(dedup_exempt, duplicate_of) ELSE dedup_exempt END,"
            " error_message = NULL, duplicate_of = NULL, stage_timings = jsonb_build_object('PENDING', now()),"
            " deleted_at = CASE WHEN %(op)s = 'ingest' THEN NULL ELSE deleted_at END"  # a reindex restores
            " WHERE id = %(id)s", {"op": operation, "bump": new_revision, "id": document_id})
        await notify_workers(conn)


# The next batch of a knowledge base's documents by id, each locked job row first, then document row.
LOCKED_BATCH = """
WITH batch AS (
    SELECT id FROM documents
    WHERE knowledge_base_id = %(kb)s AND id > %(after)s
    ORDER BY id LIMIT %(n)s
), jobs AS (
    SELECT j.document_id FROM ingestion_jobs j JOIN batch b ON b.id = j.document_id
    ORDER BY j.document_id FOR UPDATE OF j
), docs AS (
    SELECT d.id, d.status, d.parser_name, d.parser_version
    FROM documents d JOIN jobs ON jobs.document_id = d.id
    ORDER BY d.id FOR UPDATE OF d
)"""

BULK_REINDEX = LOCKED_BATCH + """, eligible AS (
    SELECT id FROM docs
    WHERE status = ANY(%(statuses)s)
      AND (%(parsers)s::text[] IS NULL
           OR (parser_name IS NOT NULL AND parser_name || ':' || parser_version <> ALL(%(parsers)s::text[])))
), reset AS (
    UPDATE ingestion_jobs j
    SET status = 'PENDING', operation = 'ingest', force = false, attempts = 0, max_attempts = %(max_attempts)s,
        available_at = now(), locked_by = NULL, locked_at = NULL, last_error = NULL, finished_at = NULL,
        queued_at = now(), lost_streak = 0, lost_workers = '{}', lost_since = NULL,
        updated_at = now()
    FROM eligible e WHERE j.document_id = e.id
    RETURNING j.document_id
), queued AS (
    UPDATE documents d
    SET status = 'PENDING', error_message = NULL, progress = '{}'::jsonb, duplicate_of = NULL,
        content_revision = d.content_revision + CASE WHEN d.published_revision IS NULL THEN 0 ELSE 1 END,
        rebuild_started_at = %(started)s,
        dedup_exempt = CASE WHEN d.status = 'OUTDATED' AND d.duplicate_of IS NOT NULL
            THEN array_append(d.dedup_exempt, d.duplicate_of) ELSE d.dedup_exempt END,
        updated_at = now(), stage_timings = jsonb_build_object('PENDING', now())
    FROM reset r WHERE d.id = r.document_id
    RETURNING d.id
), notified AS (
    SELECT pg_notify(%(jobs_channel)s, '') WHERE EXISTS (SELECT 1 FROM queued)
)
SELECT (SELECT max(id::text)::uuid FROM batch) AS last_id,
       (SELECT count(*) FROM queued) AS queued,
       (SELECT count(*) FROM docs WHERE status NOT IN ('READY', 'FAILED', 'DELETED', 'OUTDATED')) AS skipped,
       (SELECT count(*) FROM notified) AS woke
"""


REBUILD_PROGRESS = """
SELECT kb.rebuild_started_at AS started_at, count(d.id) AS queued,
       count(d.id) FILTER (WHERE d.status = 'READY') AS rebuilt,
       count(d.id) FILTER (WHERE d.status NOT IN ('READY', 'FAILED', 'DELETED', 'OUTDATED')) AS pending,
       count(d.id) FILTER (WHERE d.status = 'FAILED') AS failed,
       count(d.id) FILTER (WHERE d.status IN ('DELETED', 'OUTDATED')) AS removed,
       count(d.id) FILTER (WHERE d.published_revision IS NOT NULL) AS searchable
FROM knowledge_bases kb
LEFT JOIN documents d ON d.knowledge_base_id = kb.id AND d.rebuild_started_at = kb.rebuild_started_at
WHERE kb.id = %(kb)s AND kb.rebuild_started_at IS NOT NULL
GROUP BY kb.rebuild_started_at
"""


class KnowledgeBaseDeletionRepository:
    """Deleting a knowledge base: flag it (uploads get 409 from then on), turn every one of its
    documents into a hard-delete job in batches, and drop the knowledge base row once the workers
    have removed the last document."""

    def __init__(self, db: Database, *, max_attempts: int) -> None:
        self._db = db
        self._max_attempts = max_attempts

    async def mark_deleting(self, knowledge_base_id: UUID) -> None:
        row = await self._db.fetchone(
            "UPDATE knowledge_bases SET deleting = true, updated_at = now() WHERE id = %s RETURNING id",
            (knowledge_base_id,))
        if row is None:
            raise ResourceNotFoundError("knowledge base not found")

    async def queue_document_deletes(self, knowledge_base_id: UUID, batch_size: int = 1000) -> int:
        """Every document, whatever its status, goes to PENDING with a hard-delete job (each status
        may move to PENDING, SPEC §4); a worker still on one loses its lease. Idempotent: calling it
        again (after a crash half-way) finishes the work."""
        total = 0
        after = UUID(int=0)
        while True:
            row = await self._db.fetchone(QUEUE_KB_DELETES, {
                "kb": knowledge_base_id, "after": after, "n": batch_size, "max_attempts": self._max_attempts,
                "jobs_channel": NOTIFY_CHANNEL})
            if row is None or row["last_id"] is None:
                return total
            total += row["queued"]
            after = row["last_id"]

    async def drop_if_empty(self, knowledge_base_id: UUID, remove_leftovers: Any) -> bool:
        """Delete the knowledge base row once it owns no document; ``remove_leftovers`` (vectors,
        objects, snapshots of the whole knowledge base) runs first, under the row lock."""
        async with self._db.transaction() as conn:
            kb = await (await conn.execute(
                "SELECT id FROM knowledge_bases WHERE id = %s AND deleting FOR UPDATE", (knowledge_base_id,)
            )).fetchone()
            if kb is None:
                return False
            left = await (await conn.execute(
                "SELECT EXISTS (SELECT 1 FROM documents WHERE knowledge_base_id = %s) AS any", (knowledge_base_id,)
            )).fetchone()
            if left and left["any"]:
                return False
            await remove_leftovers()
            await conn.execute("DELETE FROM knowledge_bases WHERE id = %s", (knowledge_base_id,))
            return True


QUEUE_KB_DELETES = LOCKED_BATCH + """, reset AS (
    UPDATE ingestion_jobs j
    SET status = 'PENDING', operation = 'delete', force = true, attempts = 0, max_attempts = %(max_attempts)s,
        available_at = now(), locked_by = NULL, locked_at = NULL, last_error = NULL, finished_at = NULL,
        queued_at = now(), lost_streak = 0, lost_workers = '{}', lost_since = NULL,
        updated_at = now()
    FROM docs WHERE j.document_id = docs.id
    RETURNING j.document_id
), queued AS (
    UPDATE documents d
    SET status = 'PENDING', progress = '{}'::jsonb, error_message = NULL, updated_at = now(),
        published_revision = NULL, stage_timings = jsonb_build_object('PENDING', now())
    FROM reset r WHERE d.id = r.document_id
    RETURNING d.id
), notified AS (
    SELECT pg_notify(%(jobs_channel)s, '') WHERE EXISTS (SELECT 1 FROM queued)
)
SELECT (SELECT max(id::text)::uuid FROM batch) AS last_id,
       (SELECT count(*) FROM queued) AS queued,
       (SELECT count(*) FROM notified) AS woke
"""

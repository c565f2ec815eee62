"""The worker side of connector syncs (SPEC §9): the claim, the heartbeat, and every fenced write a
sync makes. A fenced write first renews the sync row *only if* it is still ours (RUNNING,
locked_by = me, attempts = my attempt) and holds that row lock for the rest of its transaction;
when the condition fails, ``LeaseLostError`` is raised before anything is written. Lock order: the
sync row, then a document's job row, then the document row."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID, uuid4

from psycopg.types.json import Jsonb

from ...domain.connectors import ItemState, KnowledgeBaseDeletingError, SyncLease
from ...domain.errors import ConflictError, LeaseLostError
from ...domain.metadata import FETCHED
from ...domain.status import DocumentStatus, JobStatus, check_transition, is_active, job_sources_of, names
from .connectors import ENDED, EXHAUSTED, Q, end_sync
from .database import Connection, Database
from .documents import notify_workers, reset_job
from .lifecycle import lock_document


class SyncQueue:
    """The worker side of connector syncs (``ports.ConnectorSyncs``): claim, heartbeat, fenced writes, and
    ending a sync."""

    def __init__(self, db: Database, *, lease_seconds: float, max_attempts: int) -> None:
        self._db = db
        self.lease_seconds = lease_seconds
        self._max_attempts = max_attempts

    @property
    def db(self) -> Database:
        return self._db

    async def enqueue_scheduled(self) -> int:
        row = await self._db.fetchone(Q["enqueue_scheduled"], {"max_attempts": self._max_attempts})
        return int(row["queued"]) if row else 0

    async def converge_expired(self) -> int:
        """Syncs past their last attempt whose lease expired end FAILED, with their documents."""
        async with self._db.transaction() as conn:
            rows = await (await conn.execute(Q["expired_exhausted"], {"lease_seconds": self.lease_seconds})).fetchall()
            for row in rows:
                await end_sync(conn, row["id"], "FAILED", error=EXHAUSTED, document_message=EXHAUSTED)
            return len(rows)

    async def claim(self, worker_id: str) -> SyncLease | None:
        await self.converge_expired()
        row = await self._db.fetchone(Q["claim"], {"lease_seconds": self.lease_seconds, "worker_id": worker_id})
        if row is None:
            return None
        return SyncLease(sync_id=row["id"], connector_id=row["connector_id"],
                         knowledge_base_id=row["knowledge_base_id"], worker_id=worker_id,
                         attempt=row["attempts"], max_attempts=row["max_attempts"])

    async def heartbeat(self, lease: SyncLease) -> bool:
        return await self._db.fetchone(Q["lock_owned_sync"], _params(lease)) is not None

    @asynccontextmanager
    async def fenced(self, lease: SyncLease) -> AsyncIterator[Connection]:
        """A transaction that holds the sync row, still ours, for its whole length."""
        async with self._db.transaction() as conn:
            if await (await conn.execute(Q["lock_owned_sync"], _params(lease))).fetchone() is None:
                raise LeaseLostError("this worker no longer owns the connector sync")
            yield conn

    # -- items ------------------------------------------------------------------------------
    async def find_item(self, lease: SyncLease, external_id: str) -> ItemState | None:
        row = await self._db.fetchone(Q["find_item"], {"kb": lease.knowledge_base_id,
                                                       "connector_id": lease.connector_id, "external_id": external_id})
        return None if row is None else _item_state(row)

    async def start_new_item(self, lease: SyncLease, external_id: str, filename: str, max_attempts: int) -> UUID:
        """A new remote item: its document is created FETCHING (with an idle job: nothing may claim
        it until its bytes are stored). Raises ConflictError when the knowledge base is being deleted
        or the item's document appeared meanwhile."""
        document_id = uuid4()
        async with self.fenced(lease) as conn:
            kb = await (await conn.execute(Q["kb_deleting"], {"kb": lease.knowledge_base_id})).fetchone()
            if kb is None or kb["deleting"]:
                raise KnowledgeBaseDeletingError("knowledge base is being deleted")
            source = {"kind": "connector", "connector_id": str(lease.connector_id), "external_id": external_id}
            row = await (await conn.execute(Q["insert_item_document"], {
                "id": document_id, "kb": lease.knowledge_base_id, "filename": filename, "source": Jsonb(source),
                "connector_id": lease.connector_id, "external_id": external_id,
                "sync_id": lease.sync_id})).fetchone()
            if row is None:
                raise ConflictError("the item's document was created by someone else meanwhile")
            await conn.execute(Q["insert_idle_job"], {"id": uuid4(), "document_id": document_id,
                                                      "status": JobStatus.IDLE.value, "max_attempts": max_attempts})
        return document_id

    async def begin_refetch(self, lease: SyncLease, document_id: UUID) -> ItemState:
        """New bytes for an existing, stable document: it becomes UPLOADING (the re-upload edge).
        ConflictError when it is active (left alone: never raced)."""
        async with self.fenced(lease) as conn:
            locked = await lock_document(conn, document_id)
            if is_active(locked.status):
                raise ConflictError(f"document is active ({locked.status})")
            check_transition(locked.status, DocumentStatus.UPLOADING)
            await conn.execute(Q["begin_refetch"], {"sync_id": lease.sync_id, "id": document_id})
        found = await self.find_item_by_id(document_id)
        assert found is not None
        return found

    async def find_item_by_id(self, document_id: UUID) -> ItemState | None:
        row = await self._db.fetchone(Q["item_by_id"], {"id": document_id})
        return None if row is None else _item_state(row)

    async def finish_item(self, lease: SyncLease, document_id: UUID, *, object_key: str, filename: str,
                          mime_type: str, size_bytes: int, sha256: str, revision: int, etag: str | None,
                          last_modified: str | None, max_attempts: int, fields: dict[str, Any] | None = None,
                          path: str | None = None) -> None:
        """FETCHING | UPLOADING -> PENDING with the bytes recorded and the single job queued, in one
        transaction. ConflictError when the document left intake meanwhile (the caller then removes
        the object it stored). ``fields``: the metadata's fetched keys (metadata.FETCHED) as this
        fetch found them; ``path``: the item's source.path."""
        async with self.fenced(lease) as conn:
            locked = await lock_document(conn, document_id)
            await self._require_ours(conn, lease, document_id, locked.status)
            await conn.execute(Q["finish_item"], {
                "object_key": object_key, "filename": filename, "mime_type": mime_type, "size_bytes": size_bytes,
                "sha256": sha256, "revision": revision, "etag": etag, "last_modified": last_modified,
                "id": document_id, "fetched_keys": list(FETCHED), "fields": Jsonb(fields or {}),
                "source": Jsonb({"path": path} if path else {})})
            await reset_job(conn, document_id, operation="ingest", force=False, max_attempts=max_attempts,
                            source=f"connector:{lease.connector_id}")
            await notify_workers(conn)

    async def fail_item(self, lease: SyncLease, document_id: UUID, reason: str) -> bool:
        """FETCHING | UPLOADING (ours) -> FAILED with the reason, job and document together."""
        async with self.fenced(lease) as conn:
            locked = await lock_document(conn, document_id)
            try:
                await self._require_ours(conn, lease, document_id, locked.status)
            except ConflictError:
                return False
            check_transition(locked.status, DocumentStatus.FAILED)
            if locked.status == DocumentStatus.UPLOADING:  # its previous source object is still in place
                reason = f"{reason} (the previous content is kept: reindex to use it)"
            await conn.execute(Q["fail_item_job"], {"e": reason, "id": document_id,
                                                    "sources": names(job_sources_of(JobStatus.FAILED))})
            await conn.execute(Q["fail_item_document"], {"e": reason, "id": document_id})
            return True

    async def mark_seen(self, lease: SyncLease, document_id: UUID, *, etag: str | None = None,
                        last_modified: str | None = None) -> None:
        """An unchanged item: remember what the remote said and that this sync handled it."""
        async with self.fenced(lease) as conn:
            await conn.execute(Q["mark_seen"], {"sync_id": lease.sync_id, "etag": etag,
                                                "last_modified": last_modified, "id": document_id})

    async def queue_document(self, lease: SyncLease, document_id: UUID, *, operation: str, max_attempts: int) -> None:
        """A stable document queued through its single job: ``ingest`` restores a soft-deleted one
        whose bytes came back unchanged; ``delete`` soft-deletes one whose remote item disappeared.
        ConflictError when it is active."""
        async with self.fenced(lease) as conn:
            locked = await lock_document(conn, document_id)
            if is_active(locked.status):
                raise ConflictError(f"document is active ({locked.status})")
            check_transition(locked.status, DocumentStatus.PENDING)
            await reset_job(conn, document_id, operation=operation, force=False, max_attempts=max_attempts,
                            source=f"connector:{lease.connector_id}")
            await conn.execute(Q["queue_item_document"], {"sync_id": lease.sync_id, "operation": operation,
                                                          "id": document_id})
            await notify_workers(conn)

    async def items_not_in(self, lease: SyncLease, seen: list[str]) -> list[dict[str, Any]]:
        return await self._db.fetchall(Q["connector_items_not_in"], {
            "kb": lease.knowledge_base_id, "connector_id": lease.connector_id, "seen": seen})

    async def _require_ours(self, conn: Connection, lease: SyncLease, document_id: UUID,
                            status: DocumentStatus) -> None:
        row = await (await conn.execute(Q["item_sync_id"], {"id": document_id})).fetchone()
        if status not in (DocumentStatus.FETCHING, DocumentStatus.UPLOADING) or row is None \
                or row["connector_sync_id"] != lease.sync_id:
            raise ConflictError(f"the document left intake meanwhile (it is {status})")

    # -- the sync itself ---------------------------------------------------------------------
    async def record(self, lease: SyncLease, outcome: str, external_id: str | None = None,
                     error: str | None = None) -> None:
        async with self.fenced(lease) as conn:
            await conn.execute(Q["record_item"], {"sync_id": lease.sync_id, "outcome": outcome,
                                                  "external_id": external_id, "error": error})

    async def set_count(self, lease: SyncLease, name: str, value: int) -> None:
        async with self.fenced(lease) as conn:
            await conn.execute(Q["set_count"], {"sync_id": lease.sync_id, "name": name, "value": value})

    async def complete(self, lease: SyncLease) -> None:
        async with self.fenced(lease) as conn:
            await end_sync(conn, lease.sync_id, "SUCCEEDED", error=None, document_message=ENDED)

    async def fail(self, lease: SyncLease, error: str, *, will_retry: bool, delay_seconds: float) -> None:
        async with self.fenced(lease) as conn:
            if will_retry:
                await conn.execute(Q["retry_sync"], {"sync_id": lease.sync_id, "error": error, "delay": delay_seconds})
            else:
                await end_sync(conn, lease.sync_id, "FAILED", error=error,
                               document_message=f"connector sync failed: {error}")

    async def release(self, lease: SyncLease) -> None:
        async with self.fenced(lease) as conn:
            await conn.execute(Q["release_sync"], {"sync_id": lease.sync_id})


def _item_state(row: dict[str, Any]) -> ItemState:
    return ItemState(id=row["id"], status=DocumentStatus(row["status"]), sha256=row["sha256"],
                     object_key=row["object_key"], content_revision=row["content_revision"],
                     remote_etag=row["remote_etag"], remote_last_modified=row["remote_last_modified"],
                     connector_sync_id=row["connector_sync_id"], filename=row["filename"])


def _params(lease: SyncLease) -> dict[str, Any]:
    return {"sync_id": lease.sync_id, "worker_id": lease.worker_id, "attempt": lease.attempt}

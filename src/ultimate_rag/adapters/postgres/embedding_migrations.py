"""Embedding-model migrations and their items (migration 0010). Items are leased like ingestion
jobs (SPEC §4): a claim takes a due item with ``FOR UPDATE SKIP LOCKED`` (or one whose lease
expired), and every later write on its behalf is fenced on (RUNNING, locked_by, attempts)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ...domain.embedding_models import ItemStatus, MigrationLease, MigrationStatus
from ...domain.errors import ConflictError, LeaseLostError
from ...domain.models import IndexState
from . import rows
from .database import Database
from .sql import load_queries

LEASE_EXHAUSTED = "worker lease expired and the maximum number of attempts was reached"

Q = load_queries("embedding_migrations.sql")


class EmbeddingMigrationRepository:
    def __init__(self, db: Database, *, lease_seconds: float, max_attempts: int) -> None:
        self._db = db
        self.lease_seconds = lease_seconds
        self._max_attempts = max_attempts

    async def start(self, kb_id: UUID, source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
        """The migration and one item per document that may hold an index, in one transaction;
        ConflictError when one is already running. ``target`` gets the next generation number."""
        async with self._db.transaction() as conn:
            kb = await (await conn.execute(Q["lock_knowledge_base"], {"kb": kb_id})).fetchone()
            if kb is None or kb["deleting"]:
                raise ConflictError("knowledge base is being deleted")
            if await (await conn.execute(Q["running_for_kb"], {"kb": kb_id})).fetchone():
                raise ConflictError("an embedding-model migration is already running for this knowledge base")
            last = await (await conn.execute(Q["last_generation"], {"kb": kb_id})).fetchone()
            generation = max(int(last["g"] if last else 0), int(source["generation"])) + 1
            target = target | {"generation": generation}
            row = await (await conn.execute(Q["insert_migration"], {
                "kb": kb_id, "source": Jsonb(source), "target": Jsonb(target)})).fetchone()
            assert row is not None
            await conn.execute(Q["insert_items"], {"migration": row["id"], "max_attempts": self._max_attempts,
                                                   "kb": kb_id})
        started = await self.get(row["id"])
        assert started is not None  # committed just now, and a migration row is never deleted
        return started

    async def get(self, migration_id: int) -> dict[str, Any] | None:
        row = await self._db.fetchone(Q["get"], {"id": migration_id})
        return await self._with_progress(row) if row else None

    async def latest(self, kb_id: UUID) -> dict[str, Any] | None:
        row = await self._db.fetchone(Q["latest"], {"kb": kb_id})
        return await self._with_progress(row) if row else None

    async def _with_progress(self, row: dict[str, Any]) -> dict[str, Any]:
        ids = {"id": row["id"]}
        by = {r["status"]: int(r["n"]) for r in await self._db.fetchall(Q["item_counts"], ids)}
        failures = await self._db.fetchall(Q["item_failures"], ids)
        cached = await self._db.fetchone(Q["chunk_totals"], ids)
        return row | {"progress": {
            "total": sum(by.values()) - by.get(ItemStatus.CANCELLED, 0),
            "done": by.get(ItemStatus.DONE, 0) + by.get(ItemStatus.SKIPPED, 0),
            "skipped": by.get(ItemStatus.SKIPPED, 0), "failed": by.get(ItemStatus.FAILED, 0),
            "pending": by.get(ItemStatus.PENDING, 0) + by.get(ItemStatus.RUNNING, 0),
            "chunks": int(cached["chunks"]) if cached else 0,
            "chunks_from_cache": int(cached["from_cache"]) if cached else 0,
        }, "failures": [{"document_id": str(f["document_id"]), "error": f["last_error"]} for f in failures]}

    async def running_target(self, kb_id: UUID) -> dict[str, Any] | None:
        row = await self._db.fetchone(Q["running_target"], {"kb": kb_id})
        return row["target"] | {"migration_id": row["id"]} if row else None

    async def index_state(self, kb_id: UUID) -> IndexState | None:
        """The knowledge base's settings and the target of its running migration, in one read."""
        row = await self._db.fetchone(Q["index_state"], {"kb": kb_id})
        return None if row is None else rows.index_state(row)

    async def abort(self, kb_id: UUID) -> dict[str, Any] | None:
        async with self._db.transaction() as conn:
            row = await (await conn.execute(Q["abort"], {"kb": kb_id})).fetchone()
            if row is None:
                return None
            await conn.execute(Q["cancel_items"], {"id": row["id"]})
        return await self.get(row["id"])

    async def requeue(self, migration_id: int, document_id: UUID) -> None:
        """The pipeline could not embed a document for the new generation: its item (made anew if
        the document is newer than the migration) runs again, on its own attempts."""
        await self._db.execute(Q["requeue"], {"migration": migration_id, "document": document_id,
                                              "max_attempts": self._max_attempts})

    # -- items ---------------------------------------------------------------------------------
    async def claim(self, worker_id: str) -> MigrationLease | None:
        async with self._db.transaction() as conn:
            await conn.execute(Q["converge"], {"msg": LEASE_EXHAUSTED, "lease": self.lease_seconds})
            row = await (await conn.execute(Q["claim"], {"worker": worker_id, "lease": self.lease_seconds})).fetchone()
        if row is None:
            return None
        return MigrationLease(item_id=row["id"], migration_id=row["migration_id"], document_id=row["document_id"],
                              knowledge_base_id=row["knowledge_base_id"], worker_id=worker_id,
                              attempt=row["attempts"], max_attempts=row["max_attempts"])

    async def _fenced(self, lease: MigrationLease, query: str, **params: Any) -> None:
        n = await self._db.execute(
            Q[query], {"id": lease.item_id, "worker": lease.worker_id, "attempt": lease.attempt} | params)
        if n != 1:
            raise LeaseLostError(f"migration item {lease.item_id} is no longer held by {lease.worker_id}")

    async def heartbeat(self, lease: MigrationLease) -> None:
        await self._fenced(lease, "heartbeat")

    async def finish(self, lease: MigrationLease, status: ItemStatus, chunks: int = 0, from_cache: int = 0) -> None:
        await self._fenced(lease, "finish", status=status.value, chunks=chunks, cached=from_cache)

    async def defer(self, lease: MigrationLease, seconds: float) -> None:
        """The document is in the pipeline: try again later, without burning an attempt."""
        await self._fenced(lease, "defer", s=seconds)

    async def fail(self, lease: MigrationLease, error: str, retry_in: float | None) -> None:
        """``retry_in`` None: a permanent failure, or the last attempt."""
        if retry_in is None or lease.attempt >= lease.max_attempts:
            await self._fenced(lease, "fail", e=error[:1000])
        else:
            await self._fenced(lease, "retry", e=error[:1000], s=retry_in)

    async def conclude(self, migration_id: int) -> MigrationStatus | None:
        """When no item is left to do: switch the knowledge base to the new generation (or, when
        some document failed, end the migration FAILED), in one transaction. None: not yet."""
        ids = {"id": migration_id}
        async with self._db.transaction() as conn:
            m = await (await conn.execute(Q["lock_migration"], ids)).fetchone()
            if m is None or m["status"] != MigrationStatus.RUNNING:
                return None
            left = await (await conn.execute(Q["items_left"], ids)).fetchone()
            assert left is not None
            if left["todo"]:
                return None
            if left["failed"]:
                await conn.execute(Q["end_failed"], ids | {
                    "msg": f"{left['failed']} document(s) could not be embedded with the new model;"
                           " the knowledge base keeps its current model"})
                return MigrationStatus.FAILED
            t = m["target"]
            await conn.execute(Q["switch_settings"], {"kb": m["knowledge_base_id"], "settings": Jsonb({
                "embedder": t["embedder"], "embedding_model": t["model"],
                "embedding_dimension": t["dimension"], "index_generation": t["generation"]})})
            await conn.execute(Q["end_switched"], ids)
            return MigrationStatus.SWITCHED

    async def document_status(self, document_id: UUID) -> str | None:
        row = await self._db.fetchone(Q["document_status"], {"id": document_id})
        return None if row is None else str(row["status"])

    async def document_chunks(self, document_id: UUID) -> list[dict[str, Any]]:
        """The chunks a migration item embeds again: the document's searchable ones (its published
        revision's)."""
        return await self._db.fetchall(Q["document_chunks"], {"id": document_id})

    async def running_ids(self) -> list[int]:
        return [r["id"] for r in await self._db.fetchall(Q["running_ids"])]

    async def to_drop(self, grace_seconds: float) -> list[dict[str, Any]]:
        """Finished migrations whose losing generation is still there, past the grace period
        (a search that read the old settings a moment before the switch still finds it)."""
        return await self._db.fetchall(Q["to_drop"], {"grace": grace_seconds})

    async def mark_dropped(self, migration_id: int) -> None:
        await self._db.execute(Q["mark_dropped"], {"id": migration_id})

    async def live_generations(self) -> set[tuple[UUID, int]]:
        """(knowledge base, generation) pairs that must not be swept: current, being built, or
        waiting for their drop."""
        return {(r["kb"], int(r["g"])) for r in await self._db.fetchall(Q["live_generations"])}

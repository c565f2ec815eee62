"""Embedding-model migrations and their items (migration 0010). Items are leased like ingestion
jobs (SPEC §4): a claim takes a due item with ``FOR UPDATE SKIP LOCKED`` (or one whose lease
expired), and every later write on its behalf is fenced on (RUNNING, locked_by, attempts)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ...domain.embedding_models import ItemStatus, MigrationLease, MigrationStatus
from ...domain.errors import ConflictError, LeaseLostError
from .database import Database

LEASE_EXHAUSTED = "worker lease expired and the maximum number of attempts was reached"

_CONVERGE = """
UPDATE embedding_migration_items SET status = 'FAILED', last_error = %(msg)s, locked_by = NULL, updated_at = now()
WHERE status = 'RUNNING' AND attempts >= max_attempts AND locked_at <= now() - make_interval(secs => %(lease)s)
"""

_CLAIM = """
UPDATE embedding_migration_items i
SET status = 'RUNNING', attempts = i.attempts + 1, locked_by = %(worker)s, locked_at = now(), updated_at = now()
FROM embedding_migrations m
WHERE m.id = i.migration_id AND i.id = (
    SELECT c.id FROM embedding_migration_items c JOIN embedding_migrations cm ON cm.id = c.migration_id
    WHERE cm.status = 'RUNNING' AND c.attempts < c.max_attempts AND (
        (c.status = 'PENDING' AND c.available_at <= now())
     OR (c.status = 'RUNNING' AND c.locked_at <= now() - make_interval(secs => %(lease)s)))
    ORDER BY c.available_at, c.id LIMIT 1 FOR UPDATE OF c SKIP LOCKED)
RETURNING i.id, i.migration_id, i.document_id, i.attempts, i.max_attempts, m.knowledge_base_id
"""

_FENCE = "id = %(id)s AND status = 'RUNNING' AND locked_by = %(worker)s AND attempts = %(attempt)s"


class EmbeddingMigrationRepository:
    def __init__(self, db: Database, *, lease_seconds: float, max_attempts: int) -> None:
        self._db = db
        self.lease_seconds = lease_seconds
        self._max_attempts = max_attempts

    async def start(self, kb_id: UUID, source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
        """The migration and one item per document that may hold an index, in one transaction;
        ConflictError when one is already running. ``target`` gets the next generation number."""
        async with self._db.transaction() as conn:
            kb = await (await conn.execute(
                "SELECT settings, deleting FROM knowledge_bases WHERE id = %s FOR UPDATE", (kb_id,))).fetchone()
            if kb is None or kb["deleting"]:
                raise ConflictError("knowledge base is being deleted")
            running = await (await conn.execute(
                "SELECT 1 FROM embedding_migrations WHERE knowledge_base_id = %s AND status = 'RUNNING'",
                (kb_id,))).fetchone()
            if running:
                raise ConflictError("an embedding-model migration is already running for this knowledge base")
            last = await (await conn.execute(
                "SELECT coalesce(max((target->>'generation')::int), 0) AS g FROM embedding_migrations"
                " WHERE knowledge_base_id = %s", (kb_id,))).fetchone()
            generation = max(int(last["g"] if last else 0), int(source["generation"])) + 1
            target = target | {"generation": generation}
            row = await (await conn.execute(
                "INSERT INTO embedding_migrations (knowledge_base_id, source, target) VALUES (%s, %s, %s)"
                " RETURNING id", (kb_id, Jsonb(source), Jsonb(target)))).fetchone()
            assert row is not None
            await conn.execute(
                "INSERT INTO embedding_migration_items (migration_id, document_id, max_attempts)"
                " SELECT %s, id, %s FROM documents WHERE knowledge_base_id = %s"
                " AND status NOT IN ('DELETED', 'OUTDATED')", (row["id"], self._max_attempts, kb_id))
        return await self.get(row["id"])  # type: ignore[return-value]

    async def get(self, migration_id: int) -> dict[str, Any] | None:
        row = await self._db.fetchone("SELECT * FROM embedding_migrations WHERE id = %s", (migration_id,))
        return await self._with_progress(row) if row else None

    async def latest(self, kb_id: UUID) -> dict[str, Any] | None:
        row = await self._db.fetchone(
            "SELECT * FROM embedding_migrations WHERE knowledge_base_id = %s ORDER BY id DESC LIMIT 1", (kb_id,))
        return await self._with_progress(row) if row else None

    async def _with_progress(self, row: dict[str, Any]) -> dict[str, Any]:
        counts = await self._db.fetchall(
            "SELECT status, count(*) AS n FROM embedding_migration_items WHERE migration_id = %s GROUP BY status",
            (row["id"],))
        by = {r["status"]: int(r["n"]) for r in counts}
        failures = await self._db.fetchall(
            "SELECT document_id, last_error FROM embedding_migration_items WHERE migration_id = %s"
            " AND status = 'FAILED' ORDER BY id LIMIT 20", (row["id"],))
        cached = await self._db.fetchone(
            "SELECT coalesce(sum(chunks), 0) AS chunks, coalesce(sum(from_cache), 0) AS from_cache"
            " FROM embedding_migration_items WHERE migration_id = %s", (row["id"],))
        return row | {"progress": {
            "total": sum(by.values()) - by.get(ItemStatus.CANCELLED, 0),
            "done": by.get(ItemStatus.DONE, 0) + by.get(ItemStatus.SKIPPED, 0),
            "skipped": by.get(ItemStatus.SKIPPED, 0), "failed": by.get(ItemStatus.FAILED, 0),
            "pending": by.get(ItemStatus.PENDING, 0) + by.get(ItemStatus.RUNNING, 0),
            "chunks": int(cached["chunks"]) if cached else 0,
            "chunks_from_cache": int(cached["from_cache"]) if cached else 0,
        }, "failures": [{"document_id": str(f["document_id"]), "error": f["last_error"]} for f in failures]}

    async def running_target(self, kb_id: UUID) -> dict[str, Any] | None:
        row = await self._db.fetchone(
            "SELECT id, target FROM embedding_migrations WHERE knowledge_base_id = %s AND status = 'RUNNING'",
            (kb_id,))
        return row["target"] | {"migration_id": row["id"]} if row else None

    async def index_state(self, kb_id: UUID) -> dict[str, Any] | None:
        """The knowledge base's settings and the target of its running migration, in one read."""
        return await self._db.fetchone(
            "SELECT kb.settings, m.target, m.id AS migration_id FROM knowledge_bases kb"
            " LEFT JOIN embedding_migrations m ON m.knowledge_base_id = kb.id AND m.status = 'RUNNING'"
            " WHERE kb.id = %s", (kb_id,))

    async def abort(self, kb_id: UUID) -> dict[str, Any] | None:
        async with self._db.transaction() as conn:
            row = await (await conn.execute(
                "UPDATE embedding_migrations SET status = 'ABORTED', finished_at = now(),"
                " error_message = 'aborted by a user' WHERE knowledge_base_id = %s AND status = 'RUNNING'"
                " RETURNING id", (kb_id,))).fetchone()
            if row is None:
                return None
            await conn.execute(
                "UPDATE embedding_migration_items SET status = 'CANCELLED', locked_by = NULL, updated_at = now()"
                " WHERE migration_id = %s AND status IN ('PENDING', 'RUNNING')", (row["id"],))
        return await self.get(row["id"])

    async def requeue(self, migration_id: int, document_id: UUID) -> None:
        """The pipeline could not embed a document for the new generation: its item (made anew if
        the document is newer than the migration) runs again, on its own attempts."""
        await self._db.execute(
            "INSERT INTO embedding_migration_items (migration_id, document_id, max_attempts) VALUES (%s, %s, %s)"
            " ON CONFLICT (migration_id, document_id) DO UPDATE SET status = 'PENDING', attempts = 0,"
            " locked_by = NULL, available_at = now(), updated_at = now()"
            " WHERE embedding_migration_items.status NOT IN ('RUNNING', 'CANCELLED')",
            (migration_id, document_id, self._max_attempts))

    # -- items ---------------------------------------------------------------------------------
    async def claim(self, worker_id: str) -> MigrationLease | None:
        async with self._db.transaction() as conn:
            await conn.execute(_CONVERGE, {"msg": LEASE_EXHAUSTED, "lease": self.lease_seconds})
            row = await (await conn.execute(_CLAIM, {"worker": worker_id, "lease": self.lease_seconds})).fetchone()
        if row is None:
            return None
        return MigrationLease(item_id=row["id"], migration_id=row["migration_id"], document_id=row["document_id"],
                              knowledge_base_id=row["knowledge_base_id"], worker_id=worker_id,
                              attempt=row["attempts"], max_attempts=row["max_attempts"])

    async def _fenced(self, lease: MigrationLease, assignments: str, **params: Any) -> None:
        n = await self._db.execute(
            f"UPDATE embedding_migration_items SET {assignments}, updated_at = now() WHERE {_FENCE}",
            {"id": lease.item_id, "worker": lease.worker_id, "attempt": lease.attempt} | params)
        if n != 1:
            raise LeaseLostError(f"migration item {lease.item_id} is no longer held by {lease.worker_id}")

    async def heartbeat(self, lease: MigrationLease) -> None:
        await self._fenced(lease, "locked_at = now()")

    async def finish(self, lease: MigrationLease, status: ItemStatus, chunks: int = 0, from_cache: int = 0) -> None:
        await self._fenced(lease, "status = %(status)s, locked_by = NULL, chunks = %(chunks)s,"
                           " from_cache = %(cached)s, last_error = NULL",
                           status=status.value, chunks=chunks, cached=from_cache)

    async def defer(self, lease: MigrationLease, seconds: float) -> None:
        """The document is in the pipeline: try again later, without burning an attempt."""
        await self._fenced(lease, "status = 'PENDING', attempts = attempts - 1, locked_by = NULL,"
                           " available_at = now() + make_interval(secs => %(s)s)", s=seconds)

    async def fail(self, lease: MigrationLease, error: str, retry_in: float | None) -> None:
        """``retry_in`` None: a permanent failure, or the last attempt."""
        if retry_in is None or lease.attempt >= lease.max_attempts:
            await self._fenced(lease, "status = 'FAILED', locked_by = NULL, last_error = %(e)s", e=error[:1000])
        else:
            await self._fenced(lease, "status = 'PENDING', locked_by = NULL, last_error = %(e)s,"
                               " available_at = now() + make_interval(secs => %(s)s)", e=error[:1000], s=retry_in)

    async def conclude(self, migration_id: int) -> MigrationStatus | None:
        """When no item is left to do: switch the knowledge base to the new generation (or, when
        some document failed, end the migration FAILED), in one transaction. None: not yet."""
        async with self._db.transaction() as conn:
            m = await (await conn.execute(
                "SELECT * FROM embedding_migrations WHERE id = %s FOR UPDATE", (migration_id,))).fetchone()
            if m is None or m["status"] != MigrationStatus.RUNNING:
                return None
            left = await (await conn.execute(
                "SELECT count(*) FILTER (WHERE status IN ('PENDING', 'RUNNING')) AS todo,"
                " count(*) FILTER (WHERE status = 'FAILED') AS failed"
                " FROM embedding_migration_items WHERE migration_id = %s", (migration_id,))).fetchone()
            assert left is not None
            if left["todo"]:
                return None
            if left["failed"]:
                await conn.execute(
                    "UPDATE embedding_migrations SET status = 'FAILED', finished_at = now(), error_message = %s"
                    " WHERE id = %s", (f"{left['failed']} document(s) could not be embedded with the new model;"
                                       " the knowledge base keeps its current model", migration_id))
                return MigrationStatus.FAILED
            t = m["target"]
            await conn.execute(
                "UPDATE knowledge_bases SET settings = settings || %s WHERE id = %s",
                (Jsonb({"embedder": t["embedder"], "embedding_model": t["model"],
                        "embedding_dimension": t["dimension"], "index_generation": t["generation"]}),
                 m["knowledge_base_id"]))
            await conn.execute("UPDATE embedding_migrations SET status = 'SWITCHED', finished_at = now()"
                               " WHERE id = %s", (migration_id,))
            return MigrationStatus.SWITCHED

    async def document_status(self, document_id: UUID) -> str | None:
        row = await self._db.fetchone("SELECT status FROM documents WHERE id = %s", (document_id,))
        return None if row is None else str(row["status"])

    async def document_chunks(self, document_id: UUID) -> list[dict[str, Any]]:
        """The chunks a migration item embeds again: the document's searchable ones (its published
        revision's)."""
        return await self._db.fetchall(
            "SELECT c.id, c.document_id, c.ordinal, c.content, c.heading_path FROM chunks c"
            " JOIN documents d ON d.id = c.document_id AND c.revision = d.published_revision"
            " WHERE c.document_id = %s ORDER BY c.ordinal", (document_id,))

    async def running_ids(self) -> list[int]:
        rows = await self._db.fetchall("SELECT id FROM embedding_migrations WHERE status = 'RUNNING'")
        return [r["id"] for r in rows]

    async def to_drop(self, grace_seconds: float) -> list[dict[str, Any]]:
        """Finished migrations whose losing generation is still there, past the grace period
        (a search that read the old settings a moment before the switch still finds it)."""
        return await self._db.fetchall(
            "SELECT * FROM embedding_migrations WHERE status <> 'RUNNING' AND dropped_at IS NULL"
            " AND finished_at <= now() - make_interval(secs => %s) ORDER BY id", (grace_seconds,))

    async def mark_dropped(self, migration_id: int) -> None:
        await self._db.execute("UPDATE embedding_migrations SET dropped_at = now() WHERE id = %s", (migration_id,))

    async def live_generations(self) -> set[tuple[UUID, int]]:
        """(knowledge base, generation) pairs that must not be swept: current, being built, or
        waiting for their drop."""
        rows = await self._db.fetchall(
            "SELECT id AS kb, coalesce((settings->>'index_generation')::int, 0) AS g FROM knowledge_bases"
            " UNION SELECT knowledge_base_id, (target->>'generation')::int FROM embedding_migrations"
            " WHERE status = 'RUNNING' OR dropped_at IS NULL"
            " UNION SELECT knowledge_base_id, (source->>'generation')::int FROM embedding_migrations"
            " WHERE dropped_at IS NULL")
        return {(r["kb"], int(r["g"])) for r in rows}

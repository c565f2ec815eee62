"""PostgreSQL side of maintenance and operations: the sweeper's lock and its ownership questions
(what owns an object, which vectors have no READY document), the gauges /metrics reports, the
stuck-document listing, and the stage timings a worker turns into histograms. SQL lives in
maintenance.sql."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import psycopg

from ...domain.ports import ObjectOwner, Owners
from ...domain.status import ACTIVE
from .database import Connection, Database
from .errors import translated
from .sql import load_queries

Q = load_queries("maintenance.sql")


class MaintenanceRepository:
    """``ports.MaintenanceStore`` on PostgreSQL."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[bool]:
        """Yields whether this process holds the sweep lock. The lock lives on a dedicated
        connection, never a pooled one: a session lock returned to the pool would stay held."""
        try:
            conn = await psycopg.AsyncConnection.connect(self._db.url, autocommit=True)
        except psycopg.Error as exc:
            raise translated(exc) from exc
        async with conn:
            row = await (await conn.execute(Q["try_sweep_lock"])).fetchone()
            locked = bool(row and row[0])
            try:
                yield locked
            finally:
                if locked and not conn.closed:
                    with contextlib.suppress(psycopg.Error):  # closing the connection releases it too
                        await conn.execute(Q["release_sweep_lock"])

    @asynccontextmanager
    async def owners(self, document_ids: Sequence[UUID]) -> AsyncIterator[Owners]:
        """A transaction that share-locks the documents and yields what they own; remove the
        unowned objects inside it, so no writer can start on these documents meanwhile."""
        ids = sorted(set(document_ids))
        async with self._db.transaction() as conn:
            held = {r["id"] for r in await _all(conn, Q["share_lock_documents"], {"ids": ids})}
            rows = await _all(conn, Q["object_owners"], {"ids": ids})
            locked = {r["id"]: ObjectOwner(r["id"], r["object_key"], r["status"], r["job_status"],
                                           frozenset(r["asset_keys"] or ())) for r in rows if r["id"] in held}
            busy = frozenset(r["id"] for r in rows if r["id"] not in held)
            async with self._db.kept_open(conn):
                yield Owners(locked=locked, busy=busy)

    async def existing_documents(self, ids: Iterable[UUID]) -> set[UUID]:
        return {r["id"] for r in await self._db.fetchall(Q["existing_documents"], {"ids": list(ids)})}

    async def document_revisions(self, ids: Iterable[UUID]) -> dict[UUID, tuple[int | None, int]]:
        """Per existing document: (published revision, revision last queued)."""
        rows = await self._db.fetchall(Q["document_revisions"], {"ids": list(ids)})
        return {r["id"]: (r["published_revision"], r["content_revision"]) for r in rows}

    async def existing_knowledge_bases(self, ids: Iterable[UUID]) -> set[UUID]:
        return {r["id"] for r in await self._db.fetchall(Q["existing_knowledge_bases"], {"ids": list(ids)})}

    # -- vectors (pgvector) --------------------------------------------------------------------
    async def has_table(self, table: str) -> bool:
        row = await self._db.fetchone(Q["vector_table_exists"], {"table": table})
        return bool(row and row["present"])

    async def vector_documents_after(self, table: str, after: UUID, limit: int) -> list[UUID]:
        sql = Q["vector_documents_after"].replace("{table}", _identifier(table))
        return [r["document_id"] for r in await self._db.fetchall(sql, {"after": after, "limit": limit})]

    async def remove_orphan_vectors(self, table: str, document_ids: Sequence[UUID]) -> dict[UUID, int]:
        """Delete the vectors (dense and sparse) that are not chunks of their document's published
        revision, of documents whose job no worker runs (locked meanwhile), or whose row is gone.
        Returns dense vectors removed per document."""
        candidates = await self._db.fetchall(Q["vector_candidates"].replace("{table}", _identifier(table)),
                                             {"ids": list(document_ids)})
        gone = [r["document_id"] for r in candidates if r["gone"]]
        present = [r["document_id"] for r in candidates if not r["gone"]]
        if not candidates:
            return {}
        async with self._db.transaction() as conn:
            idle = [r["document_id"] for r in await _all(conn, Q["lock_idle_jobs"], {"ids": sorted(present)})]
            sql = Q["delete_orphan_vectors"]
            removed = await _all(conn, sql.replace("{table}", _identifier(table)), {"idle": idle, "gone": gone})
            await conn.execute(sql.replace("{table}", "chunk_sparse_vectors"), {"idle": idle, "gone": gone})
        counts: dict[UUID, int] = {}
        for row in removed:
            counts[row["document_id"]] = counts.get(row["document_id"], 0) + 1
        return counts


class OperationsQueries:
    """What operators look at: gauges for /metrics, stuck documents, a finished run's timings."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def document_metrics(self, stuck_after_seconds: float, lease_seconds: float) -> list[dict[str, Any]]:
        return await self._db.fetchall(_with_stuck(Q["document_metrics"]),
                                       _stuck_params(stuck_after_seconds, lease_seconds))

    async def job_metrics(self) -> list[dict[str, Any]]:
        return await self._db.fetchall(Q["job_metrics"])

    async def stuck_documents(self, older_than_seconds: float, limit: int,
                              lease_seconds: float) -> list[dict[str, Any]]:
        return await self._db.fetchall(_with_stuck(Q["stuck_documents"]), {
            **_stuck_params(older_than_seconds, lease_seconds), "limit": limit})


def _with_stuck(sql: str) -> str:
    return sql.replace("{stuck}", Q["stuck_condition"].rstrip().rstrip(";"))


def _stuck_params(older_than_seconds: float, lease_seconds: float) -> dict[str, Any]:
    return {"older_than": older_than_seconds, "lease_seconds": lease_seconds,
            "active": sorted(s.value for s in ACTIVE)}


def _identifier(table: str) -> str:
    """Vector table names are ``chunk_vectors_<dimension>``; refuse anything else outright."""
    prefix, _, dimension = table.rpartition("_")
    if prefix != "chunk_vectors" or not dimension.isdigit():
        raise ValueError(f"not a vector table: {table!r}")
    return table


async def _all(conn: Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return await (await conn.execute(sql, params)).fetchall()

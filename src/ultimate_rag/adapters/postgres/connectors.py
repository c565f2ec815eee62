"""Connectors and their syncs in PostgreSQL (SPEC §9).

``ConnectorRepository`` is the API side (connectors, sync requests, abort, history); the worker
side (claim, heartbeat, fenced writes) is ``connector_syncs.SyncQueue``. Both share the row types
and ``end_sync`` defined here. Lock order: the sync row, then a document's job row, then the
document row (the order used everywhere else too).

Documents a sync creates are ``FETCHING`` (new items); existing documents that get new bytes go
through the re-upload edge, ``UPLOADING -> PENDING``. Both carry the sync's id
(``connector_sync_id``) so that whatever ends the sync — completion, abort, a crash past its last
attempt, the connector's deletion — fails every document it left in intake in the same transaction.
"""

from __future__ import annotations

import builtins
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg.types.json import Jsonb

from ...domain.connectors import Connector, Sync
from ...domain.errors import ConflictError, ResourceNotFoundError
from ...domain.status import INTAKE_FAILURE_SOURCES, JobStatus, job_sources_of, names
from .database import Connection, Database
from .documents import notify_workers
from .sql import load_queries

Q = load_queries("connectors.sql")
ABORTED = "connector sync aborted"
EXHAUSTED = "worker lease expired and the maximum number of attempts was reached"
ENDED = "the connector sync ended before this item was fetched"
_ACTIVE_SYNC = ("PENDING", "RUNNING")


def _connector(row: dict[str, Any]) -> Connector:
    return Connector(id=row["id"], knowledge_base_id=row["knowledge_base_id"], kind=row["kind"], name=row["name"],
                     config=row["config"] or {}, schedule_seconds=row["schedule_seconds"],
                     next_sync_at=row["next_sync_at"], created_at=row["created_at"], updated_at=row["updated_at"])


def _sync(row: dict[str, Any]) -> Sync:
    return Sync(id=row["id"], connector_id=row["connector_id"], trigger=row["trigger"], status=row["status"],
                attempts=row["attempts"], max_attempts=row["max_attempts"], counts=row["counts"] or {},
                errors=row["errors"] or [], error=row["error"], created_at=row["created_at"],
                started_at=row["started_at"], finished_at=row["finished_at"])


async def end_sync(conn: Connection, sync_id: UUID, status: str, *, error: str | None, document_message: str) -> int:
    """End a sync (its row already locked by this transaction) and fail every document it left
    FETCHING or UPLOADING, job row before document row. Returns how many documents were failed."""
    await conn.execute(Q["end_sync"], {"sync_id": sync_id, "status": status, "error": error})
    return await fail_left_in_intake(conn, sync_id, document_message)


async def fail_left_in_intake(conn: Connection, sync_id: UUID, message: str) -> int:
    sources = names(INTAKE_FAILURE_SOURCES)
    jobs = await (await conn.execute(Q["lock_left_in_intake_jobs"], {"sync_id": sync_id,
                                                                      "sources": sources})).fetchall()
    if not jobs:
        return 0
    failed = await (await conn.execute(Q["fail_left_in_intake"], {
        "ids": [r["document_id"] for r in jobs], "sync_id": sync_id, "message": message, "sources": sources,
        "job_sources": names(job_sources_of(JobStatus.FAILED))})).fetchall()
    return len(failed)


class ConnectorRepository:
    """``ports.ConnectorStore`` on PostgreSQL."""

    def __init__(self, db: Database, *, sync_max_attempts: int) -> None:
        self._db = db
        self._max_attempts = sync_max_attempts

    async def create(self, knowledge_base_id: UUID, *, kind: str, name: str, config: dict[str, Any],
                     schedule_seconds: int | None, max_per_knowledge_base: int | None = None) -> Connector:
        async with self._db.transaction() as conn:
            kb = await (await conn.execute(Q["lock_kb_for_connectors"], {"kb": knowledge_base_id})).fetchone()
            if kb is None:
                raise ResourceNotFoundError("knowledge base not found")
            if kb["deleting"]:
                raise ConflictError("knowledge base is being deleted")
            if max_per_knowledge_base is not None:
                count = await (await conn.execute(Q["count_connectors"], {"kb": knowledge_base_id})).fetchone()
                if count is not None and count["n"] >= max_per_knowledge_base:
                    raise ConflictError(f"this knowledge base already has {count['n']} connectors, the most"
                                        f" allowed ({max_per_knowledge_base}): delete one first")
            row = await (await conn.execute(Q["insert_connector"], {
                "id": uuid4(), "kb": knowledge_base_id, "kind": kind, "name": name, "config": Jsonb(config),
                "schedule": schedule_seconds})).fetchone()
        assert row is not None
        return _connector(row)

    async def get(self, knowledge_base_id: UUID, connector_id: UUID) -> Connector:
        row = await self._db.fetchone(Q["get_connector"], {"id": connector_id, "kb": knowledge_base_id})
        if row is None:
            raise ResourceNotFoundError("connector not found")
        return _connector(row)

    async def load(self, connector_id: UUID) -> Connector | None:
        row = await self._db.fetchone(Q["load_connector"], {"id": connector_id})
        return _connector(row) if row else None

    async def list(self, knowledge_base_id: UUID) -> list[Connector]:
        found = await self._db.fetchall(Q["list_connectors"], {"kb": knowledge_base_id})
        return [_connector(r) for r in found]

    async def update(self, knowledge_base_id: UUID, connector_id: UUID, *, name: str | None = None,
                     config: dict[str, Any] | None = None, schedule_seconds: int | None = None,
                     schedule_given: bool = False) -> Connector:
        row = await self._db.fetchone(Q["update_connector"], {
            "id": connector_id, "kb": knowledge_base_id, "name": name,
            "config": None if config is None else Jsonb(config),
            "schedule_given": schedule_given, "schedule": schedule_seconds})
        if row is None:
            raise ResourceNotFoundError("connector not found")
        return _connector(row)

    async def delete(self, knowledge_base_id: UUID, connector_id: UUID) -> Sync | None:
        """Abort its queued or running sync (documents it left in intake become FAILED), then remove
        the connector and its history. Its documents stay, as plain documents of the knowledge base."""
        async with self._db.transaction() as conn:
            found = await (await conn.execute(Q["lock_connector"], {"id": connector_id,
                                                                    "kb": knowledge_base_id})).fetchone()
            if found is None:
                raise ResourceNotFoundError("connector not found")
            aborted = await self._abort_active(conn, connector_id)
            await conn.execute(Q["delete_connector"], {"id": connector_id})
            return aborted

    async def request_sync(self, knowledge_base_id: UUID, connector_id: UUID, trigger: str = "manual") -> Sync:
        async with self._db.transaction() as conn:
            kb = await (await conn.execute(Q["connector_kb_deleting"], {"id": connector_id,
                                                                        "kb": knowledge_base_id})).fetchone()
            if kb is None:
                raise ResourceNotFoundError("connector not found")
            if kb["deleting"]:
                raise ConflictError("knowledge base is being deleted")
            try:
                async with conn.transaction():
                    row = await (await conn.execute(Q["insert_sync"], {
                        "id": uuid4(), "connector_id": connector_id, "kb": knowledge_base_id, "trigger": trigger,
                        "max_attempts": self._max_attempts})).fetchone()
            except psycopg.errors.UniqueViolation as exc:
                raise ConflictError("a sync of this connector is already queued or running") from exc
            await notify_workers(conn)
        assert row is not None
        return _sync(row)

    async def abort(self, knowledge_base_id: UUID, connector_id: UUID) -> Sync:
        async with self._db.transaction() as conn:
            await self.get(knowledge_base_id, connector_id)
            aborted = await self._abort_active(conn, connector_id)
        if aborted is None:
            raise ConflictError("this connector has no queued or running sync to abort")
        return await self.get_sync(aborted.id)

    async def _abort_active(self, conn: Connection, connector_id: UUID) -> Sync | None:
        row = await (await conn.execute(Q["lock_active_sync"], {"connector_id": connector_id,
                                                                "statuses": list(_ACTIVE_SYNC)})).fetchone()
        if row is None:
            return None
        await end_sync(conn, row["id"], "ABORTED", error=ABORTED, document_message=ABORTED)
        return _sync(row)

    async def get_sync(self, sync_id: UUID) -> Sync:
        row = await self._db.fetchone(Q["get_sync"], {"id": sync_id})
        if row is None:
            raise ResourceNotFoundError("sync not found")
        return _sync(row)

    async def syncs(self, connector_id: UUID, limit: int = 20) -> builtins.list[Sync]:  # not the method `list`
        found = await self._db.fetchall(Q["list_syncs"], {"connector_id": connector_id, "limit": limit})
        return [_sync(r) for r in found]

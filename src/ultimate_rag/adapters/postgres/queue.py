"""The job queue seen from the worker side: claim, heartbeat and every fenced write (SPEC §4).

A fenced write first locks the job row with the lease condition (RUNNING, locked_by = me,
attempts = my attempt). If that finds nothing, the lease is lost and ``LeaseLostError`` is raised
before anything is written: a worker that lost its job commits nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ...domain import status as tables
from ...domain.errors import LeaseLostError
from ...domain.models import Chunk, DocumentAsset, Lease
from ...domain.status import RESTORABLE_FROM_UPLOAD, DocumentStatus, JobOperation, check_transition, sources_of
from .batching import GroupedCalls
from .database import Connection, Database
from .documents import NOTIFY_CHANNEL, notify_workers, published_chunk_ids
from .sql import load_queries

log = logging.getLogger(__name__)
Q = load_queries("queue.sql")
# the fenced document updates: one fencing statement, four ways to change the document
_SET_STAGE, _SET_PROGRESS, _SET_PARSER, _SET_WARNINGS = (
    Q["fenced_document_update"].replace("{assignments}", Q[name])
    for name in ("set_stage", "set_progress", "set_parser", "set_warnings"))
ConnHook = Callable[[Connection], Awaitable[None]]
# no longer produced (a lost attempt is given back; see the claim); kept for readers of old rows
EXHAUSTED_MESSAGE = "worker lease expired and the maximum number of attempts was reached"
UPLOAD_EXPIRED_MESSAGE = ("the re-upload was interrupted before its content was stored; "
                          "reindex to use the previous content")
_RESTORABLE = sorted(s.value for s in RESTORABLE_FROM_UPLOAD)
# the claim's writes take their sources from the transition tables (see ``claim`` in queue.sql):
# a converged job (done, poison, retry), its document (poison, retry), an expired re-upload
CLAIM_SOURCES = {
    "job_succeed_from": tables.names(tables.job_sources_of(tables.JobStatus.SUCCEEDED)),
    "job_fail_from": tables.names(tables.job_sources_of(tables.JobStatus.FAILED)),
    "job_retry_from": tables.names(tables.job_sources_of(tables.JobStatus.PENDING)),
    "fail_from": tables.names(sources_of(DocumentStatus.FAILED)),
    "retry_from": tables.names(sources_of(DocumentStatus.PENDING)),
    "upload_restore_from": tables.names(tables.UPLOAD_RESTORE_SOURCES),
}
# a lost attempt (SQL format(): %s is the worker), the document while it waits (attempt, seconds),
# and a poison file (lost attempts in a row, workers)
LOST_MESSAGE = "worker %s stopped before finishing this attempt (it crashed, was killed or stopped responding)"
INTERRUPTED_MESSAGE = ("attempt %s was interrupted because its worker stopped; this does not count as a failed "
                       "attempt, retrying automatically in %s s")
POISON_MESSAGE = ("this file stopped the worker processing it %s times in a row (on %s different workers) while "
                  "other documents were processed normally: it was set aside so that it cannot crash more "
                  "workers; check the file (or report it), then reindex it")


def queue_database(url: str, *, max_size: int, min_size: int = 1) -> Database:
    """The queue's own pool: its statements never change, so they are planned once (generic
    plans), and a connection used a moment ago is trusted without a check round trip."""
    return Database(url, min_size=min_size, max_size=max_size, register_vector=False, generic_plans=True,
                    trust_recent_seconds=2.0)


class JobQueue:
    def __init__(self, db: Database, *, lease_seconds: float, retry_delay_seconds: float = 5.0,
                 poison_after: int = 3) -> None:
        self._db = db
        self.lease_seconds = lease_seconds
        self.retry_delay_seconds = retry_delay_seconds
        self.poison_after = poison_after  # lost attempts in a row (on 2+ workers) that make a poison file
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._completions: GroupedCalls[Lease, bool] = GroupedCalls(self._complete_ready_jobs)

    @property
    def db(self) -> Database:
        return self._db

    # -- claiming -----------------------------------------------------------------------------
    async def claim(self, worker_id: str, limit: int = 1, *, idle: bool = True) -> list[Lease]:
        """Claim up to ``limit`` due jobs in queue order in one statement (see ``claim`` in
        queue.sql), converging expired leases first (backoff, or FAILED for a poison file).
        ``idle``: the worker runs nothing now, so it may take a suspect, which then runs alone."""
        if limit <= 0:
            return []
        claimed = await self._db.fetchall(Q["claim"], self.claim_params(worker_id, limit, idle=idle))
        return [
            Lease(job_id=r["id"], document_id=r["document_id"], worker_id=worker_id, attempt=r["attempts"],
                  max_attempts=r["max_attempts"], operation=JobOperation(r["operation"]), force=r["force"],
                  suspect=r["suspect"])
            for r in claimed
        ]

    def claim_params(self, worker_id: str, limit: int, *, idle: bool = True) -> dict[str, Any]:
        return {"lease_seconds": self.lease_seconds, "limit": limit, "worker_id": worker_id, "idle": idle,
                "retry_delay": self.retry_delay_seconds, "poison_after": self.poison_after,
                "lost_message": LOST_MESSAGE, "interrupted_message": INTERRUPTED_MESSAGE,
                "poison_message": POISON_MESSAGE, "restorable": _RESTORABLE,
                "upload_message": UPLOAD_EXPIRED_MESSAGE, "still_served": STILL_SERVED, **CLAIM_SOURCES}

    async def heartbeat(self, lease: Lease) -> bool:
        row = await self._db.fetchone(Q["heartbeat"], _lease_params(lease))
        return row is not None

    async def wait_for_work(self, timeout: float, stop: asyncio.Event) -> None:
        """Block until a job is announced (LISTEN/NOTIFY), ``timeout`` passes, or ``stop`` is set.
        One listening connection is kept open across waits; when it breaks, the poll interval is
        the fallback and the next wait reconnects."""
        try:
            conn = await self._listening_connection()
            waiter = asyncio.ensure_future(_drain(conn.notifies(timeout=timeout, stop_after=1)))
            stopper = asyncio.ensure_future(stop.wait())
            try:
                done, _ = await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when this wait is itself cancelled: no task is left behind
                for task in (waiter, stopper):
                    task.cancel()
                await asyncio.gather(waiter, stopper, return_exceptions=True)
            if waiter in done and not waiter.cancelled():
                waiter.result()
        except (psycopg.Error, OSError) as exc:
            log.warning("waiting for jobs through LISTEN failed, polling instead: %s", exc)
            await self.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout)

    async def _listening_connection(self) -> psycopg.AsyncConnection[Any]:
        if self._listener is None or self._listener.closed:
            self._listener = await psycopg.AsyncConnection.connect(self._db.url, autocommit=True, connect_timeout=10)
            await self._listener.execute(sql.SQL(Q["listen"]).format(channel=sql.Identifier(NOTIFY_CHANNEL)))
        return self._listener

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.close()

    # -- fenced writes --------------------------------------------------------------------------
    @asynccontextmanager
    async def fenced(self, lease: Lease, lock_first: ConnHook | None = None,
                     ) -> AsyncIterator[tuple[Connection, DocumentStatus]]:
        """A transaction that holds the job (still ours) and the document row, locked in that order
        (after whatever ``lock_first`` takes, e.g. a knowledge base's deduplication lock)."""
        async with self._db.transaction() as conn:
            if lock_first is not None:
                await lock_first(conn)
            owned = await (await conn.execute(Q["lock_owned_job"], _lease_params(lease))).fetchone()
            if owned is None:
                raise LeaseLostError()
            doc = await (await conn.execute(Q["lock_document"], {"document_id": lease.document_id})).fetchone()
            if doc is None:
                raise LeaseLostError("the document no longer exists")
            yield conn, DocumentStatus(doc["status"])

    async def _fenced_update(self, lease: Lease, sql: str, params: dict[str, Any],
                             from_statuses: frozenset[DocumentStatus] | None = None) -> None:
        """One round trip: the lease is checked (and renewed) and the document updated together.
        ``sql`` is one of the ``_SET_*`` statements of this module, never user input."""
        allowed = sorted(from_statuses if from_statuses is not None else DocumentStatus)
        row = await self._db.fetchone(sql, {**_lease_params(lease), **params, "document_id": lease.document_id,
                                            "from_statuses": [s.value for s in allowed]})
        if row is None:
            await self._explain_refusal(lease, params.get("status"))

    async def _explain_refusal(self, lease: Lease, target: str | None) -> None:
        state = await self._db.fetchone(Q["fencing_state"], _lease_params(lease))
        if state is None or not state["owned"]:
            raise LeaseLostError()
        if state["document_status"] is None:
            raise LeaseLostError("the document no longer exists")
        check_transition(state["document_status"], target or state["document_status"])
        raise LeaseLostError(f"document is {state['document_status']}")  # pragma: no cover - defensive

    async def enter_stage(self, lease: Lease, status: DocumentStatus, progress: dict[str, Any] | None = None) -> None:
        """Status before action: commit the stage before its work starts; clears a stale error.
        Entering PARSING starts a new run, so the stage timings start over."""
        await self._fenced_update(lease, _SET_STAGE, {"status": status.value, "progress": Jsonb(progress or {})},
                                  sources_of(status))

    async def report_progress(self, lease: Lease, progress: dict[str, Any]) -> None:
        await self._fenced_update(lease, _SET_PROGRESS, {"progress": Jsonb(progress)})

    async def record_parser(self, lease: Lease, name: str, version: str) -> None:
        """Before a parse: its parser, and no warnings yet (a failed parse leaves none behind)."""
        await self._fenced_update(lease, _SET_PARSER, {"name": name, "version": version})

    async def record_warnings(self, lease: Lease, warnings: Sequence[str]) -> None:
        await self._fenced_update(lease, _SET_WARNINGS, {"warnings": Jsonb(list(warnings))})

    async def complete_ready(self, lease: Lease, chunks: Sequence[Chunk],
                             write_vectors: Callable[[], Awaitable[None]], *, revision: int,
                             lock_first: ConnHook | None = None, alongside: ConnHook | None = None,
                             before_commit: Callable[[], Awaitable[None]] | None = None) -> list[str]:
        """INDEXING -> READY: the revision swap. The new revision's chunks go in, ``published_revision``
        becomes ``revision``, the previous revision's chunk and asset rows go and the job ends, all
        in one transaction: search sees the old revision or the new one, never a mix or nothing.
        Returns the object keys of the previous revision's assets, to remove after the commit (with
        the previous revision's vectors and snapshot: a crash first leaves them to the janitor).

        READY is the commit flag (SPEC §4 rule 2): it is written last, together with the facts it
        vouches for, and only while the job is still ours. ``write_vectors`` (the new revision's
        vectors, beside the published ones) runs while the job row is locked by this transaction,
        so no other worker can own the job while vectors are written.
        """
        async with self.fenced(lease, lock_first) as (conn, current):
            check_transition(current, DocumentStatus.READY)
            await write_vectors()
            if alongside is not None:  # e.g. the older duplicate becomes OUTDATED in the same commit
                await alongside(conn)
            document = {"document_id": lease.document_id}
            await conn.execute(Q["delete_chunks"], document)
            async with conn.cursor() as cur:
                await cur.executemany(
                    Q["insert_chunk"],
                    [(c.id, c.document_id, c.knowledge_base_id, revision, c.ordinal, c.content, c.token_count,
                      list(c.heading_path), Jsonb(c.locator.to_metadata()), Jsonb(c.metadata)) for c in chunks],
                )
            stale = await (await conn.execute(Q["delete_other_revisions_assets"],
                                              {**document, "revision": revision})).fetchall()
            await conn.execute(Q["document_ready"], {**document, "chunk_count": len(chunks), "revision": revision})
            await conn.execute(Q["succeed_job"], {"job_id": lease.job_id})
            if before_commit is not None:  # the last step before the commit (the snapshot's rename)
                await before_commit()
            return [r["object_key"] for r in stale]
        raise AssertionError("unreachable")  # pragma: no cover - fenced() raises or yields

    async def complete_already_ready(self, lease: Lease) -> None:
        """``complete`` for a document that is READY already: only the job changes. Concurrent
        completions share one statement (each still fenced on its own lease)."""
        if not await self._completions.submit(lease):
            state = await self._db.fetchone(Q["fencing_state"], _lease_params(lease))
            if not state or not state["owned"]:
                raise LeaseLostError()
            raise LeaseLostError(f"document is {state['document_status']}, not READY")

    async def _complete_ready_jobs(self, leases: list[Lease]) -> list[bool]:
        ended = {r["id"] for r in await self._db.fetchall(Q["complete_ready_jobs"], {
            "job_ids": [x.job_id for x in leases], "worker_ids": [x.worker_id for x in leases],
            "attempts": [x.attempt for x in leases]})}
        return [x.job_id in ended for x in leases]

    async def complete_delete(self, lease: Lease, *, hard: bool,
                              remove_outside: Callable[[Connection], Awaitable[None]]) -> None:
        """DELETING -> DELETED (soft: the row stays, its derived data goes) or the row is gone (hard).
        ``remove_outside`` removes vectors, objects and the snapshot while the job row is locked."""
        async with self.fenced(lease) as (conn, current):
            check_transition(current, DocumentStatus.DELETED)
            await remove_outside(conn)
            document = {"document_id": lease.document_id}
            if hard:
                await conn.execute(Q["delete_document"], document)
                return
            for name in ("delete_chunks", "delete_assets", "delete_hash_bands", "document_deleted"):
                await conn.execute(Q[name], document)
            await conn.execute(Q["succeed_job"], {"job_id": lease.job_id})

    async def fail(self, lease: Lease, *, error: str, will_retry: bool, delay_seconds: float,
                   document_message: str, cleanup: Callable[[], Awaitable[None]] | None = None) -> None:
        """End this attempt: retry later (job and document PENDING) or FAILED. The partial index is
        cleaned by ``cleanup`` while the job row is still locked by us. A published revision keeps
        serving (a failed rebuild), and a FAILED document's message says so."""
        async with self.fenced(lease) as (conn, current):
            if cleanup is not None:
                await cleanup()
            target = DocumentStatus.PENDING if will_retry else DocumentStatus.FAILED
            if current != target:
                check_transition(current, target)
            if will_retry:
                await conn.execute(Q["retry_job"], {"job_id": lease.job_id, "error": error, "delay": delay_seconds})
            else:
                await conn.execute(Q["fail_job"], {"job_id": lease.job_id, "error": error})
            document = {"document_id": lease.document_id}
            await conn.execute(Q["document_attempt_ended"], {
                **document, "status": target.value, "message": document_message, "still_served": STILL_SERVED})
            await drop_unpublished(conn, lease.document_id)

    async def release(self, lease: Lease) -> None:
        """Graceful shutdown: give the job back without burning an attempt."""
        async with self.fenced(lease) as (conn, current):
            await conn.execute(Q["release_job"], {"job_id": lease.job_id})
            if current != DocumentStatus.PENDING:
                check_transition(current, DocumentStatus.PENDING)
                await conn.execute(Q["document_released"], {"document_id": lease.document_id})
            await notify_workers(conn)

    async def replace_assets(self, lease: Lease, assets: Sequence[DocumentAsset], revision: int) -> list[str]:
        async with self.fenced(lease) as (conn, _):
            return await replace_asset_rows(conn, lease.document_id, assets, revision)

    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]:
        """The chunks search may serve for this document (empty when it has no published revision)."""
        return await published_chunk_ids(self._db, document_id)

    async def load_document_row(self, document_id: UUID) -> dict[str, Any] | None:
        return await self._db.fetchone(Q["load_document"], {"document_id": document_id})


async def _drain(gen: Any) -> None:
    """Consume the generator to its end (``stop_after``/``timeout``): leaving it suspended would
    keep the connection locked and hang its close."""
    async for _ in gen:
        pass


def _lease_params(lease: Lease) -> dict[str, Any]:
    return {"job_id": lease.job_id, "worker_id": lease.worker_id, "attempt": lease.attempt}


# appended to the message of a FAILED document whose published revision still serves
STILL_SERVED = " (the previous version, revision %s, is still searchable)"


async def drop_unpublished(conn: Connection, document_id: UUID) -> None:
    """A rebuild or intake ended without READY: chunks of anything but the published revision go
    (with no published revision, all of them); the published revision's stay and keep serving. Beside
    a published revision, the failed one's asset rows go too (their objects are the janitor's)."""
    for name in ("delete_unpublished_chunks", "delete_unpublished_assets", "unpublished_chunk_count"):
        await conn.execute(Q[name], {"document_id": document_id})


async def replace_asset_rows(conn: Connection, document_id: UUID, assets: Sequence[DocumentAsset],
                             revision: int | None = None) -> list[str]:
    """Swap the asset rows of one revision of the document (default: its current one; those of the
    published revision stay until the READY commit); returns the object keys no longer referenced."""
    if revision is None:
        row = await (await conn.execute(Q["content_revision"], {"document_id": document_id})).fetchone()
        revision = row["content_revision"] if row else 1
    params = {"document_id": document_id, "revision": revision}
    old = await (await conn.execute(Q["delete_revision_assets"], params)).fetchall()
    async with conn.cursor() as cur:
        await cur.executemany(
            Q["insert_asset"],
            [(a.id, a.document_id, a.knowledge_base_id, revision, a.object_key, a.mime_type, a.size_bytes, a.page,
              a.description, a.locator_key) for a in assets],
        )
    keep = {a.object_key for a in assets}
    return [r["object_key"] for r in old if r["object_key"] not in keep]

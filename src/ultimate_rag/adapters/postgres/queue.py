"""The job queue seen from the worker side (SPEC §4): claim, heartbeat, wait for work, end an
attempt (fail: retry or FAILED) or hand it back (release), and the fencing every other write of a
job builds on (``fenced``, ``fenced_update``). What the pipeline writes under that fencing (stages,
assets, the READY and DELETED commits) is ``pipeline.py``'s.

A fenced write first locks the job row with the lease condition (RUNNING, locked_by = me,
attempts = my attempt). If that finds nothing, the lease is lost and ``LeaseLostError`` is raised
before anything is written: a worker that lost its job commits nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, NoReturn
from uuid import UUID

import psycopg
from psycopg import sql

from ...domain import status as tables
from ...domain.errors import LeaseLostError
from ...domain.models import Lease
from ...domain.retry import OUTAGE_TEMPLATE
from ...domain.status import RESTORABLE_FROM_UPLOAD, DocumentStatus, JobOperation, check_transition
from . import rows
from .database import Connection, Database
from .documents import NOTIFY_CHANNEL, notify_workers
from .sql import load_queries

log = logging.getLogger(__name__)
Q = load_queries("queue.sql")
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
    "fail_from": tables.names(tables.sources_of(DocumentStatus.FAILED)),
    "retry_from": tables.names(tables.sources_of(DocumentStatus.PENDING)),
    "upload_restore_from": tables.names(tables.UPLOAD_RESTORE_SOURCES),
}
# a lost attempt (SQL format(): %s is the worker), the document while it waits (attempt, seconds),
# and a poison file (lost attempts in a row, workers)
LOST_MESSAGE = "worker %s stopped before finishing this attempt (it crashed, was killed or stopped responding)"
INTERRUPTED_MESSAGE = ("attempt %s was interrupted because its worker stopped; this does not count as a failed "
                       "attempt, retrying automatically in %s s")
# a lease that expired while the database was down (it restarted after the last renewal)
OUTAGE_ERROR = "the database was unavailable (it restarted after this attempt's last lease renewal)"
OUTAGE_INTERRUPTED = OUTAGE_TEMPLATE.format(attempt="%s", error="the database was unavailable", delay="%s")
POISON_MESSAGE = ("this file stopped the worker processing it %s times in a row (on %s different workers) while "
                  "other documents were processed normally: it was set aside so that it cannot crash more "
                  "workers; check the file (or report it), then reindex it")


def queue_database(url: str, *, max_size: int, min_size: int = 1,
                   idle_transaction_timeout: float | None = None) -> Database:
    """The queue's own pool: its statements never change, so they are planned once (generic
    plans). Fenced transactions run on it, the READY commit's too, whose language-centroid shares
    are pgvector vectors: the vector types are registered, as on the main pool."""
    return Database(url, min_size=min_size, max_size=max_size, generic_plans=True,
                    idle_transaction_timeout=idle_transaction_timeout)


class JobQueue:
    def __init__(self, db: Database, *, lease_seconds: float, retry_delay_seconds: float = 5.0,
                 poison_after: int = 3) -> None:
        self._db = db
        self.lease_seconds = lease_seconds
        self.retry_delay_seconds = retry_delay_seconds
        self.poison_after = poison_after  # lost attempts in a row (on 2+ workers) that make a poison file
        self._listener: psycopg.AsyncConnection[Any] | None = None

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
            Lease(job_id=r["job_id"], document_id=r["document_id"], worker_id=worker_id, attempt=r["attempts"],
                  max_attempts=r["max_attempts"], operation=JobOperation(r["operation"]), force=r["force"],
                  suspect=r["suspect"], document=rows.pipeline_document(r) if r["id"] is not None else None)
            for r in claimed
        ]

    def claim_params(self, worker_id: str, limit: int, *, idle: bool = True) -> dict[str, Any]:
        return {"lease_seconds": self.lease_seconds, "limit": limit, "worker_id": worker_id, "idle": idle,
                "retry_delay": self.retry_delay_seconds, "poison_after": self.poison_after,
                "lost_message": LOST_MESSAGE, "interrupted_message": INTERRUPTED_MESSAGE,
                "poison_message": POISON_MESSAGE, "restorable": _RESTORABLE, "outage_error": OUTAGE_ERROR,
                "outage_interrupted": OUTAGE_INTERRUPTED,
                "upload_message": UPLOAD_EXPIRED_MESSAGE, "still_served": STILL_SERVED, **CLAIM_SOURCES}

    async def heartbeat(self, lease: Lease) -> bool:
        row = await self._db.fetchone(Q["heartbeat"], lease_params(lease))
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

    # -- fencing: the primitives every write of a job builds on ---------------------------------
    @asynccontextmanager
    async def fenced(self, lease: Lease, lock_first: str | None = None,
                     ) -> AsyncIterator[tuple[Connection, DocumentStatus]]:
        """A transaction that holds the job (still ours) and the document row, locked in that order
        (after the transaction-level advisory lock named ``lock_first``, e.g. a knowledge base's
        deduplication lock, taken in the same statement)."""
        async with self._db.transaction() as conn:
            row = await (await conn.execute(Q["lock_fenced"], {
                **lease_params(lease), "document_id": lease.document_id, "first": lock_first})).fetchone()
            if row is None:
                raise LeaseLostError()
            if row["status"] is None:
                raise LeaseLostError("the document no longer exists")
            yield conn, DocumentStatus(row["status"])

    async def fenced_update(self, lease: Lease, statement: str, params: dict[str, Any],
                            from_statuses: frozenset[DocumentStatus] | None = None) -> None:
        """One round trip: the lease is checked (and renewed) and the document updated together.
        ``statement`` is a ``fenced_document_update`` composed once by its module (never user
        input); the document changes only from ``from_statuses`` (default: any)."""
        allowed = sorted(from_statuses if from_statuses is not None else DocumentStatus)
        row = await self._db.fetchone(statement, {**lease_params(lease), **params, "document_id": lease.document_id,
                                                  "from_statuses": [s.value for s in allowed]})
        if row is None:
            await self._explain_refusal(lease, params.get("status"))

    async def lease_state(self, lease: Lease) -> tuple[bool, DocumentStatus | None]:
        """Why a fenced statement changed nothing: is the job still ours, and where is the document?"""
        state = await self._db.fetchone(Q["fencing_state"], lease_params(lease))
        if state is None:
            return False, None
        status = state["document_status"]
        return bool(state["owned"]), DocumentStatus(status) if status is not None else None

    async def _explain_refusal(self, lease: Lease, target: str | None) -> NoReturn:
        owned, current = await self.lease_state(lease)
        if not owned:
            raise LeaseLostError()
        if current is None:
            raise LeaseLostError("the document no longer exists")
        check_transition(current, target or current)
        raise LeaseLostError(f"document is {current}")  # pragma: no cover - defensive

    # -- the end of an attempt -----------------------------------------------------------------
    async def fail(self, lease: Lease, *, error: str, will_retry: bool, delay_seconds: float,
                   document_message: str, cleanup: Callable[[], Awaitable[None]] | None = None,
                   given_back: bool = False) -> None:
        """End this attempt: retry later (job and document PENDING) or FAILED. The partial index is
        cleaned by ``cleanup`` while the job row is still locked by us. A published revision keeps
        serving (a failed rebuild), and a FAILED document's message says so. ``given_back``: the
        attempt does not count (a dependency's outage: see ``retry_job``)."""
        async with self.fenced(lease) as (conn, current):
            if cleanup is not None:  # the vector store's work, on other connections
                async with self._db.kept_open(conn):
                    await cleanup()
            target = DocumentStatus.PENDING if will_retry else DocumentStatus.FAILED
            if current != target:
                check_transition(current, target)
            if will_retry:
                await conn.execute(Q["retry_job"], {"job_id": lease.job_id, "error": error, "delay": delay_seconds,
                                                    "given_back": given_back})
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


def fenced_document_update(assignments: str) -> str:
    """The one fencing statement (``fenced_document_update`` in queue.sql) with its SET list: a
    fragment of a ``.sql`` file, composed once at import by the module that owns it."""
    return Q["fenced_document_update"].replace("{assignments}", assignments)


async def _drain(gen: Any) -> None:
    """Consume the generator to its end (``stop_after``/``timeout``): leaving it suspended would
    keep the connection locked and hang its close."""
    async for _ in gen:
        pass


def lease_params(lease: Lease) -> dict[str, Any]:
    return {"job_id": lease.job_id, "worker_id": lease.worker_id, "attempt": lease.attempt}


# appended to the message of a FAILED document whose published revision still serves
STILL_SERVED = " (the previous version, revision %s, is still searchable)"


async def drop_unpublished(conn: Connection, document_id: UUID) -> None:
    """A rebuild or intake ended without READY: chunks of anything but the published revision go
    (with no published revision, all of them); the published revision's stay and keep serving. Beside
    a published revision, the failed one's asset rows go too (their objects are the janitor's)."""
    for name in ("delete_unpublished_chunks", "delete_unpublished_assets", "unpublished_chunk_count"):
        await conn.execute(Q[name], {"document_id": document_id})

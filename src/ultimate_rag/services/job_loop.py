"""The worker loop: claim jobs as slots free up, heartbeat each one, cancel it the moment its lease
is lost, classify failures (permanent -> FAILED, transient -> retry with backoff), and on shutdown
finish or hand back in-flight jobs without burning an attempt. Every log line of a job carries its
document, job and worker ids; claims, outcomes and stage durations go to the worker's metrics; and,
when configured, the orphan sweeper runs here between jobs (one process at a time)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from uuid import UUID

from ..domain.errors import DatabaseError, PermanentError
from ..domain.models import Lease
from ..domain.ports import IdleBackfill, JobLeases, LeaseKeeping
from ..domain.retry import backoff_seconds, outage_message, retry_message
from ..domain.status import JobOperation
from ..logs import log_context
from ..observability import WorkerMetrics
from .connectors.runner import SyncRunner, start_syncs, stop_syncs
from .document_deletion import DocumentDeletion
from .embedding.migration import EmbeddingMigrations
from .failures import explain
from .janitor import Janitor, SweepReport
from .leases import LeasedRunner, Outcome
from .outages import OutageLog
from .processing import DocumentProcessor

log = logging.getLogger(__name__)


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class WorkerConfig:
    concurrency: int = 2
    heartbeat_seconds: float = 20.0
    poll_interval_seconds: float = 2.0
    retry_delay_seconds: float = 5.0
    shutdown_grace_seconds: float = 10.0
    janitor_interval_seconds: float = 0.0  # 0: this worker never sweeps orphans
    lease_keeper: bool = True  # renew job leases on a thread of their own (ports.LeaseKeeping), else on the loop


class IngestionWorker:
    def __init__(self, queue: JobLeases, processor: DocumentProcessor, config: WorkerConfig,
                 worker_id: str | None = None, document_deletion: DocumentDeletion | None = None,
                 metrics: WorkerMetrics | None = None, janitor: Janitor | None = None,
                 connector_runner: SyncRunner | None = None, backfill: IdleBackfill | None = None,
                 migrations: EmbeddingMigrations | None = None,
                 keeper: LeaseKeeping[Lease] | None = None) -> None:
        self.queue = queue
        self.migrations = migrations  # its items run one at a time beside the jobs
        self.backfill = backfill  # a batch whenever no job is due
        self.processor = processor
        self.document_deletion = document_deletion
        self.config = config
        self.worker_id = worker_id or new_worker_id()
        self.metrics = metrics or WorkerMetrics()
        self.janitor = janitor
        self.connector_runner = connector_runner  # connector syncs, one at a time, beside the jobs
        self._timings: dict[UUID, dict[str, str]] = {}  # job -> its finished run's stage timings (metrics)
        self._tasks: dict[asyncio.Task[None], Lease] = {}
        self.keeper = keeper  # the job leases' own renewal thread (closed when the worker stops)
        self.runner = LeasedRunner(_JobLeases(self), heartbeat_seconds=config.heartbeat_seconds,
                                    label=lambda lease: f"job {lease.job_id}",
                                    context=lambda lease: log_context(document_id=lease.document_id,
                                                                      job_id=lease.job_id, worker_id=self.worker_id),
                                    keeper=keeper, ended=lambda lease: lease.end.settled())
        self._shutting_down = False
        self._hand_back = asyncio.Event()
        self._claims = OutageLog("claiming jobs", log)  # one warning per outage, not one per poll
        self._backfilling = OutageLog("backfill", log)
        self.processed = 0

    async def run(self, stop: asyncio.Event) -> None:
        with log_context(worker_id=self.worker_id):
            sweeper = self._start_janitor(stop)
            syncs = start_syncs(self.connector_runner, self.worker_id, stop)
            migrating = asyncio.create_task(self.migrations.run(
                self.worker_id, stop, self.config.poll_interval_seconds, self.config.heartbeat_seconds),
                name="embedding-migrations") if self.migrations is not None else None
            try:
                await self._loop(stop)
            finally:
                self._close_keeper()
                if migrating is not None:
                    migrating.cancel()
                    await asyncio.gather(migrating, return_exceptions=True)
                await stop_syncs(syncs, self.config.shutdown_grace_seconds)
                if sweeper is not None:
                    sweeper.cancel()
                    await asyncio.gather(sweeper, return_exceptions=True)

    def _start_janitor(self, stop: asyncio.Event) -> asyncio.Task[None] | None:
        interval = self.config.janitor_interval_seconds
        if self.janitor is None or interval <= 0:
            return None
        return asyncio.create_task(self.janitor.run_periodically(interval, stop, self._observe_sweep), name="janitor")

    def _observe_sweep(self, report: SweepReport) -> None:
        self.metrics.record_sweep(len(report.objects), len(report.snapshots), sum(report.vectors.values()))

    async def _loop(self, stop: asyncio.Event) -> None:
        log.info("worker %s started (concurrency %d)", self.worker_id, self.config.concurrency)
        slot_freed = asyncio.Event()

        def finished(task: asyncio.Task[None]) -> None:
            self._tasks.pop(task, None)
            slot_freed.set()

        lane = self.processor.lane  # long parses there do not count against the concurrency
        lane.on_enter(slot_freed.set)
        while not stop.is_set():
            # a suspect (its last attempt's worker died) runs alone: nothing is claimed beside it
            alone = any(lease.suspect for lease in self._tasks.values())
            free = 0 if alone else self.config.concurrency - (len(self._tasks) - lane.size)
            claimed: list[Lease] = []
            if free > 0:
                try:
                    claimed = await self.queue.claim(self.worker_id, free, idle=not self._tasks)
                except (DatabaseError, OSError) as exc:
                    self._claims.failed(exc)
                    await _sleep_or_stop(stop, self.config.poll_interval_seconds)
                    continue
                self._claims.succeeded()
            self.metrics.claimed.inc(len(claimed))
            for lease in claimed:
                task = asyncio.create_task(self._run_job(lease), name=f"job-{lease.job_id}")
                self._tasks[task] = lease
                task.add_done_callback(finished)
            if claimed and len(claimed) == free:
                slot_freed.clear()
                await _first_of(stop.wait(), slot_freed.wait())
            elif not claimed:
                if not self._tasks and await self._backfill_step():
                    continue
                slot_freed.clear()
                await _first_of(stop.wait(), self.queue.wait_for_work(self.config.poll_interval_seconds, stop),
                                slot_freed.wait() if self._tasks else asyncio.sleep(3600))
        await self._shutdown()

    async def _backfill_step(self) -> bool:
        if self.backfill is None or self.backfill.done:
            return False
        try:
            done = bool(await self.backfill.step())
        except Exception as exc:  # never let the backfill stop the worker; it tries again when idle
            self._backfilling.failed(exc)
            return False
        self._backfilling.succeeded()
        return done

    async def run_until_idle(self, max_jobs: int | None = None) -> int:
        """Process due jobs one at a time until none is left (tests, benchmarks, one-shot runs)."""
        done = 0
        try:
            while max_jobs is None or done < max_jobs:
                leases = await self.queue.claim(self.worker_id, 1)
                if not leases:
                    return done
                self.metrics.claimed.inc()
                await self._run_job(leases[0])
                done += 1
            return done
        finally:
            self._close_keeper()

    def _close_keeper(self) -> None:
        if self.keeper is not None:
            self.keeper.close()

    def hand_back_now(self) -> None:
        """Cut the shutdown's grace period short: in-flight jobs are handed back at once."""
        self._hand_back.set()

    async def _shutdown(self) -> None:
        """Let in-flight jobs finish within the grace period (or until ``hand_back_now``); hand
        back the rest."""
        self._shutting_down = True
        if self._tasks:
            log.info("waiting up to %.0fs for %d in-flight job(s)", self.config.shutdown_grace_seconds,
                     len(self._tasks))
            await _first_of(asyncio.wait(list(self._tasks), timeout=self.config.shutdown_grace_seconds),
                            self._hand_back.wait())
            pending = [task for task in self._tasks if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        log.info("worker %s stopped", self.worker_id)

    async def _run_job(self, lease: Lease) -> None:
        started = time.monotonic()
        try:
            outcome = await self.runner.run(lease, lambda: self._dispatch(lease))
        finally:
            timings = self._timings.pop(lease.job_id, None)
        if outcome == Outcome.LOST:
            self.metrics.lease_losses.inc()
        elif outcome == Outcome.DONE:
            self.processed += 1
            self._record_success(lease, time.monotonic() - started, timings)

    def _record_success(self, lease: Lease, seconds: float, timings: dict[str, str] | None) -> None:
        """Count the job and observe its stage durations: a delete is one stage (timed here, as a
        hard delete leaves no row to read); an ingest run's stages are the document's
        ``stage_timings`` the READY commit returned, stamped by the database as each stage began
        (none when the document was READY already: they were counted by the run that made it so)."""
        self.metrics.succeeded.labels(operation=lease.operation.value).inc()
        if lease.operation == JobOperation.DELETE:
            self.metrics.stage_seconds.labels(stage="DELETING").observe(seconds)
        elif timings:
            self.metrics.record_stages(timings)

    async def _dispatch(self, lease: Lease) -> None:
        if lease.operation == JobOperation.INGEST:
            timings = await self.processor.process(lease)
            if timings:
                self._timings[lease.job_id] = timings
        elif lease.operation == JobOperation.DELETE and self.document_deletion is not None:
            await self.document_deletion.process(lease)
        else:
            raise PermanentError(f"operation {lease.operation} is not supported by this worker")

    async def _handle_failure(self, lease: Lease, exc: BaseException) -> None:
        """Readers see the mapped reason (document and job history alike); the raw text of an
        infrastructure error goes only to this log line, which carries the document and job ids."""
        failure = explain(exc)
        permanent, error = failure.permanent, failure.reason
        # a dependency's outage gives the attempt back (SPEC §4), like a lost lease
        will_retry = failure.outage or (not permanent and lease.attempt < lease.max_attempts)
        delay = backoff_seconds(lease.attempt, self.config.retry_delay_seconds) if will_retry else 0.0
        if failure.outage:
            message = outage_message(lease.attempt, error, delay)
        else:
            message = retry_message(lease.attempt, lease.max_attempts, error) if will_retry else error
        self.metrics.record_failure(exc, will_retry)
        (log.info if permanent else log.warning)(
            "job %s (document %s) attempt %d/%d %s: %s%s%s", lease.job_id, lease.document_id,
            lease.attempt, lease.max_attempts, "given back" if failure.outage else "failed", error,
            f" [{failure.detail}]" if failure.mapped else "", f"; retry in {delay:.1f}s" if will_retry else "",
            exc_info=exc if failure.unexpected else None,
        )
        await self.queue.fail(lease, error=error, will_retry=will_retry, delay_seconds=delay,
                              document_message=message, given_back=failure.outage,
                              cleanup=lambda: self.processor.cleanup_partial_index(lease))


class _JobLeases:
    """``ports.TaskLeases`` over the job queue, for the leased-task runner: a failure is classified
    (permanent, or retried with backoff) by the worker; a hand-back is counted."""

    def __init__(self, worker: IngestionWorker) -> None:
        self._worker = worker

    async def heartbeat(self, lease: Lease) -> bool:
        return await self._worker.queue.heartbeat(lease)

    async def fail(self, lease: Lease, error: BaseException) -> None:
        await self._worker._handle_failure(lease, error)

    async def release(self, lease: Lease) -> None:
        await self._worker.queue.release(lease)
        self._worker.metrics.released.inc()


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _first_of(*aws: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

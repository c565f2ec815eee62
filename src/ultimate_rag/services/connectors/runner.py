"""Connector syncs inside a worker process: queue the scheduled syncs that are due, claim one sync
at a time through PostgreSQL, and run it under the leased-task runner (``services/leases.py``):
heartbeat, stop the moment its lease is lost (abort, reclaim), retry a sync that failed as a whole
(its source could not be listed) with backoff, and on shutdown hand it back without burning an
attempt (its next run resumes it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from ...domain.connectors import SyncLease
from ...domain.errors import PermanentError
from ...domain.ports import ConnectorStore, ConnectorSyncs
from ...domain.retry import backoff_seconds
from ...logs import log_context
from ..failures import reason_for
from ..leases import LeasedRunner, OneAtATime, Outcome
from .sources import ConnectorLimits
from .sync import SyncService

log = logging.getLogger(__name__)


class SyncLeases:
    """``ports.ClaimingLeases`` over the sync queue: a claim first queues the scheduled syncs that
    are due; a failure is retried with backoff while attempts are left."""

    def __init__(self, queue: ConnectorSyncs, *, retry_delay_seconds: float) -> None:
        self.queue = queue
        self.retry_delay_seconds = retry_delay_seconds

    async def claim(self, worker_id: str) -> SyncLease | None:
        await self.queue.enqueue_scheduled()
        return await self.queue.claim(worker_id)

    async def heartbeat(self, lease: SyncLease) -> bool:
        return await self.queue.heartbeat(lease)

    async def fail(self, lease: SyncLease, error: BaseException) -> None:
        reason = reason_for(error)
        will_retry = not isinstance(error, PermanentError) and lease.attempt < lease.max_attempts
        delay = backoff_seconds(lease.attempt, self.retry_delay_seconds) if will_retry else 0.0
        log.warning("connector sync %s attempt %d/%d failed: %s%s", lease.sync_id, lease.attempt,
                    lease.max_attempts, reason, f"; retry in {delay:.1f}s" if will_retry else "")
        await self.queue.fail(lease, reason, will_retry=will_retry, delay_seconds=delay)

    async def release(self, lease: SyncLease) -> None:
        await self.queue.release(lease)


class SyncRunner:
    def __init__(self, queue: ConnectorSyncs, service: SyncService, *, heartbeat_seconds: float,
                 poll_interval_seconds: float, retry_delay_seconds: float) -> None:
        self.queue = queue
        self.service = service
        leases = SyncLeases(queue, retry_delay_seconds=retry_delay_seconds)
        runner = LeasedRunner(leases, heartbeat_seconds=heartbeat_seconds,
                              label=lambda lease: f"connector sync {lease.sync_id}",
                              context=lambda lease: log_context(worker_id=lease.worker_id))
        self._loop = OneAtATime(leases, runner, self._run, poll_interval_seconds=poll_interval_seconds,
                                what="connector sync")

    async def run_periodically(self, worker_id: str, stop: asyncio.Event) -> None:
        """Until ``stop``: run due syncs one after the other, polling when there is none."""
        await self._loop.run_periodically(worker_id, stop)

    async def run_until_idle(self, worker_id: str) -> int:
        """Run queued syncs until none is due (tests, one-shot runs)."""
        return await self._loop.run_until_idle(worker_id)

    async def run_one(self, lease: SyncLease) -> Outcome:
        return await self._loop.run_one(lease)

    async def _run(self, lease: SyncLease) -> None:
        await self.service.run(lease)
        log.info("connector sync %s finished", lease.sync_id)


@dataclass
class ConnectorServices:
    """The connector side of the container (built by ``bootstrap.build``)."""

    repository: ConnectorStore
    queue: ConnectorSyncs
    service: SyncService
    runner: SyncRunner
    limits: ConnectorLimits
    min_schedule_seconds: int
    max_per_knowledge_base: int = 50


def start_syncs(runner: SyncRunner | None, worker_id: str, stop: asyncio.Event) -> asyncio.Task[Any] | None:
    """The worker's connector-sync loop, beside its ingestion loop (one sync at a time per worker)."""
    if runner is None:
        return None
    return asyncio.create_task(runner.run_periodically(worker_id, stop), name="connector-syncs")


async def stop_syncs(task: asyncio.Task[Any] | None, grace_seconds: float) -> None:
    """After ``stop``: let the loop hand its sync back, then make sure it is gone."""
    if task is None:
        return
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(task), grace_seconds + 5.0)
    task.cancel()
    with contextlib.suppress(BaseException):
        await task

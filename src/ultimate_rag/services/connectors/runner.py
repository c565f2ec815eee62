"""Connector syncs inside a worker process: queue the scheduled syncs that are due, claim one sync
at a time through PostgreSQL, heartbeat it, stop it the moment its lease is lost (abort, reclaim),
retry a sync that failed as a whole (its source could not be listed) with backoff, and on
shutdown hand it back without burning an attempt (its next run resumes it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from ...adapters.postgres.connector_syncs import SyncQueue
from ...adapters.postgres.connectors import SyncLease
from ...domain.errors import LeaseLostError, PermanentError
from ...domain.retry import backoff_seconds
from ...logs import log_context
from .sync import SyncService, describe

log = logging.getLogger(__name__)


class SyncRunner:
    def __init__(self, queue: SyncQueue, service: SyncService, *, heartbeat_seconds: float,
                 poll_interval_seconds: float, retry_delay_seconds: float) -> None:
        self.queue = queue
        self.service = service
        self.heartbeat_seconds = heartbeat_seconds
        self.poll_interval_seconds = poll_interval_seconds
        self.retry_delay_seconds = retry_delay_seconds

    async def run_periodically(self, worker_id: str, stop: asyncio.Event) -> None:
        """Until ``stop``: run due syncs one after the other, polling when there is none."""
        while not stop.is_set():
            try:
                await self.queue.enqueue_scheduled()
                lease = await self.queue.claim(worker_id)
            except (psycopg.Error, OSError) as exc:
                log.warning("connector sync claim failed (database unavailable?): %s", exc)
                lease = None
            if lease is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.poll_interval_seconds)
                continue
            run = asyncio.create_task(self.run_one(lease))
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait({run, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not run.done():  # shutting down: stop the sync and hand it back
                run.cancel()
                with contextlib.suppress(BaseException):
                    await run
                await self._release(lease)

    async def run_until_idle(self, worker_id: str) -> int:
        """Run queued syncs until none is due (tests, one-shot runs)."""
        done = 0
        await self.queue.enqueue_scheduled()
        while (lease := await self.queue.claim(worker_id)) is not None:
            await self.run_one(lease)
            done += 1
        return done

    async def run_one(self, lease: SyncLease) -> None:
        with log_context(worker_id=lease.worker_id):
            work = asyncio.create_task(self.service.run(lease))
            beat = asyncio.create_task(self._heartbeat(lease, work))
            try:
                await asyncio.shield(work)
                log.info("connector sync %s finished", lease.sync_id)
            except asyncio.CancelledError:
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
                raise
            except LeaseLostError as exc:
                log.warning("connector sync %s stopped: its lease is gone (%s)", lease.sync_id, exc)
            except Exception as exc:
                if work.cancelled():
                    log.warning("connector sync %s stopped: its lease is gone", lease.sync_id)
                else:
                    await self._failed(lease, exc)
            finally:
                beat.cancel()
                with contextlib.suppress(BaseException):
                    await beat

    async def _heartbeat(self, lease: SyncLease, work: asyncio.Task[None]) -> None:
        while not work.done():
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                alive = await self.queue.heartbeat(lease)
            except (psycopg.Error, OSError) as exc:
                log.warning("connector sync %s: heartbeat failed, will retry: %s", lease.sync_id, exc)
                continue
            if not alive:
                log.warning("connector sync %s: lease lost (aborted or reclaimed); stopping", lease.sync_id)
                work.cancel()
                return

    async def _failed(self, lease: SyncLease, exc: BaseException) -> None:
        error = describe(exc)
        will_retry = not isinstance(exc, PermanentError) and lease.attempt < lease.max_attempts
        delay = backoff_seconds(lease.attempt, self.retry_delay_seconds) if will_retry else 0.0
        log.warning("connector sync %s attempt %d/%d failed: %s%s", lease.sync_id, lease.attempt,
                    lease.max_attempts, error, f"; retry in {delay:.1f}s" if will_retry else "")
        try:
            await self.queue.fail(lease, error, will_retry=will_retry, delay_seconds=delay)
        except LeaseLostError:
            pass
        except Exception:
            log.exception("connector sync %s: could not record the failure; its lease will expire", lease.sync_id)

    async def _release(self, lease: SyncLease) -> None:
        try:
            await self.queue.release(lease)
            log.info("connector sync %s handed back for another worker", lease.sync_id)
        except LeaseLostError:
            pass
        except Exception:
            log.exception("connector sync %s: could not hand back; its lease will expire", lease.sync_id)

"""One runner for leased work, whatever the lease is for (a document's job, a connector sync): run
the work while a heartbeat renews the lease, cancel it the moment the lease is lost, record a
failure through the queue, and on shutdown (this task cancelled) stop the work and hand the lease
back without burning an attempt. The queues behind it implement ``ports.TaskLeases``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Any, Generic, TypeVar

from ..domain.errors import DatabaseError, LeaseLostError
from ..domain.ports import ClaimingLeases, TaskLeases

log = logging.getLogger(__name__)

L = TypeVar("L")


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"  # the failure was recorded (or could not be: the lease then expires)
    LOST = "lost"  # the lease was lost: nothing more was written


class LeasedRunner(Generic[L]):
    def __init__(self, leases: TaskLeases[L], *, heartbeat_seconds: float, label: Callable[[L], str],
                 context: Callable[[L], AbstractContextManager[Any]] | None = None) -> None:
        self.leases = leases
        self.heartbeat_seconds = heartbeat_seconds
        self._label = label
        self._context = context  # e.g. the lease's ids on every log line

    async def run(self, lease: L, work: Callable[[], Awaitable[None]]) -> Outcome:
        """Run ``work`` under the lease. Cancelling this call hands the lease back (unless it was
        lost already) and re-raises."""
        with self._context(lease) if self._context else contextlib.nullcontext():
            return await self._run(lease, work)

    async def _run(self, lease: L, work: Callable[[], Awaitable[None]]) -> Outcome:
        name = self._label(lease)
        task = asyncio.ensure_future(work())
        lost = asyncio.Event()
        beat = asyncio.create_task(self.heartbeat(lease, task, lost))
        try:
            await asyncio.shield(task)
            return Outcome.DONE
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if lost.is_set() and (me is None or not me.cancelling()):
                log.warning("%s: lease lost, work cancelled", name)  # the heartbeat stopped it
                return Outcome.LOST
            task.cancel()  # we are shutting down: stop the work, then hand the lease back
            with contextlib.suppress(BaseException):
                await task
            if not lost.is_set():
                await self._release(lease, name)
            raise
        except LeaseLostError as exc:
            log.warning("%s: lease lost, stopping without further writes (%s)", name, exc)
            return Outcome.LOST
        except Exception as exc:
            if task.cancelled() or lost.is_set():
                log.warning("%s: lease lost, work cancelled", name)
                return Outcome.LOST
            return await self._fail(lease, name, exc)
        finally:
            beat.cancel()
            with contextlib.suppress(BaseException):
                await beat

    async def heartbeat(self, lease: L, work: asyncio.Future[None], lost: asyncio.Event) -> None:
        """Renew the lease every ``heartbeat_seconds`` until ``work`` ends; cancel it (and set
        ``lost``) when the lease is gone. A database error is retried at the next beat."""
        while not work.done():
            await asyncio.sleep(self.heartbeat_seconds)
            if work.done():  # finished while we slept: the work has ended, its lease with it
                return
            try:
                alive = await self.leases.heartbeat(lease)
            except (DatabaseError, OSError) as exc:
                log.warning("%s: heartbeat failed, will retry: %s", self._label(lease), exc)
                continue
            if not alive and work.done():  # it succeeded (or failed) while the renewal ran
                return
            if not alive:
                log.warning("%s: lease lost (reclaimed or ended by an operator); cancelling", self._label(lease))
                lost.set()
                work.cancel()
                return

    async def _fail(self, lease: L, name: str, exc: Exception) -> Outcome:
        try:
            await self.leases.fail(lease, exc)
        except LeaseLostError:
            log.warning("%s: lease lost before the failure could be recorded", name)
            return Outcome.LOST
        except Exception:
            log.exception("%s: could not record the failure; its lease will expire and it is retried", name)
        return Outcome.FAILED

    async def _release(self, lease: L, name: str) -> None:
        try:
            await self.leases.release(lease)
            log.info("%s handed back for another worker", name)
        except LeaseLostError:
            pass
        except Exception:
            log.exception("%s: could not hand back; its lease will expire", name)


class OneAtATime(Generic[L]):
    """A loop over leases claimed one at a time (connector syncs): run the due ones one after the
    other, poll when there is none, and on ``stop`` hand the running one back."""

    def __init__(self, leases: ClaimingLeases[L], runner: LeasedRunner[L], work: Callable[[L], Awaitable[None]],
                 *, poll_interval_seconds: float, what: str) -> None:
        self._leases = leases
        self._runner = runner
        self._work = work
        self._poll = poll_interval_seconds
        self._what = what

    async def run_one(self, lease: L) -> Outcome:
        return await self._runner.run(lease, lambda: self._work(lease))

    async def run_until_idle(self, worker_id: str) -> int:
        done = 0
        while (lease := await self._leases.claim(worker_id)) is not None:
            await self.run_one(lease)
            done += 1
        return done

    async def run_periodically(self, worker_id: str, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                lease = await self._leases.claim(worker_id)
            except (DatabaseError, OSError) as exc:
                log.warning("%s claim failed (database unavailable?): %s", self._what, exc)
                lease = None
            if lease is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._poll)
                continue
            run = asyncio.create_task(self.run_one(lease))
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait({run, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not run.done():  # shutting down: the runner stops the work and hands the lease back
                run.cancel()
            with contextlib.suppress(BaseException):
                await run

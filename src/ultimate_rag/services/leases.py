"""One runner for leased work, whatever the lease is for (a document's job, a connector sync): run
the work while a heartbeat renews the lease, cancel it the moment the lease is lost, record a
failure through the queue, and on shutdown (this task cancelled) stop the work and hand the lease
back without burning an attempt. The queues behind it implement ``ports.TaskLeases``.

The renewals run on a keeper's own thread and connection when one is given (``ports.LeaseKeeping``:
a worker's event loop runs below the model's threads and may wait for CPU; the lease must not),
else as a task on the event loop. A renewal that finds the lease gone cancels the work, unless the
work ended the lease itself (``ended``: its end committed, e.g. READY, its cleanup still running):
a finished job is never reported lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Generic, TypeVar

from ..domain.errors import DatabaseError, LeaseLostError
from ..domain.ports import ClaimingLeases, LeaseKeeping, TaskLeases
from .failures import explain, is_outage
from .outages import OutageLog

log = logging.getLogger(__name__)

L = TypeVar("L")


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"  # the failure was recorded (or could not be: the lease then expires)
    LOST = "lost"  # the lease was lost: nothing more was written


class LeasedRunner(Generic[L]):
    def __init__(self, leases: TaskLeases[L], *, heartbeat_seconds: float, label: Callable[[L], str],
                 context: Callable[[L], AbstractContextManager[object]] | None = None,
                 keeper: LeaseKeeping[L] | None = None, ended: Callable[[L], Awaitable[bool]] | None = None,
                 ) -> None:
        """``keeper``: renews the leases on its own thread (else a heartbeat task on the loop);
        ``ended``: whether the work has ended its lease itself (waiting for a write in flight)."""
        self.leases = leases
        self.heartbeat_seconds = heartbeat_seconds
        self._label = label
        self._context = context  # e.g. the lease's ids on every log line
        self._keeper = keeper
        self._ended = ended
        self._losing: set[asyncio.Task[None]] = set()

    async def run(self, lease: L, work: Callable[[], Awaitable[None]]) -> Outcome:
        """Run ``work`` under the lease. Cancelling this call hands the lease back (unless it was
        lost already) and re-raises."""
        with self._context(lease) if self._context else contextlib.nullcontext():
            return await self._run(lease, work)

    async def _run(self, lease: L, work: Callable[[], Awaitable[None]]) -> Outcome:
        name = self._label(lease)
        task = asyncio.ensure_future(work())
        lost = asyncio.Event()
        if self._keeper is not None:
            beat: asyncio.Task[None] | None = None
            stop_keeping = self._keeper.keep(lease, lambda: self._start_losing(lease, task, lost))
        else:
            beat, stop_keeping = asyncio.create_task(self.heartbeat(lease, task, lost)), _nothing
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
            stop_keeping()
            if beat is not None:
                beat.cancel()
                with contextlib.suppress(BaseException):
                    await beat

    def _start_losing(self, lease: L, work: asyncio.Future[None], lost: asyncio.Event) -> None:
        """The keeper found the lease gone (called on the event loop)."""
        losing = asyncio.get_running_loop().create_task(self._lose(lease, work, lost))
        self._losing.add(losing)
        losing.add_done_callback(self._losing.discard)

    async def _lose(self, lease: L, work: asyncio.Future[None], lost: asyncio.Event) -> None:
        """A renewal found the lease gone: cancel the work, unless it ended the lease itself (its
        end committed: the cleanup after it runs to the end, and the run counts as done)."""
        if work.done():
            return
        if self._ended is not None and await self._ended(lease):
            log.debug("%s: ended by its own work; its renewal stops", self._label(lease))
            return
        if work.done():
            return
        log.warning("%s: lease lost (reclaimed or ended by an operator); cancelling", self._label(lease))
        lost.set()
        work.cancel()

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
            if not alive:  # gone, or ended by the work itself while the renewal ran (see _lose)
                await self._lose(lease, work, lost)
                return

    async def _fail(self, lease: L, name: str, exc: Exception) -> Outcome:
        try:
            await self.leases.fail(lease, exc)
        except LeaseLostError:
            log.warning("%s: lease lost before the failure could be recorded", name)
            return Outcome.LOST
        except Exception as recording:
            if not is_outage(recording):
                log.exception("%s: could not record the failure; its lease will expire and it is retried", name)
            else:  # the database is down: one line, the traceback says nothing more
                log.warning("%s: could not record the failure (%s); its lease will expire and it is retried",
                            name, explain(recording).detail)
        return Outcome.FAILED

    async def _release(self, lease: L, name: str) -> None:
        try:
            await self.leases.release(lease)
            log.info("%s handed back for another worker", name)
        except LeaseLostError:
            pass
        except Exception:
            log.exception("%s: could not hand back; its lease will expire", name)


def _nothing() -> None:
    return None


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
        claims = OutageLog(f"claiming {self._what}", log)
        while not stop.is_set():
            try:
                lease = await self._leases.claim(worker_id)
                claims.succeeded()
            except (DatabaseError, OSError) as exc:
                claims.failed(exc)
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

"""The leased-task runner over an in-memory lease queue (its semantics do not depend on a
database: the jobs' and syncs' real queues are exercised by the crash and lease tests). Work that
ends, fails, loses its lease, or is cancelled at shutdown."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from ultimate_rag.domain.errors import LeaseLostError
from ultimate_rag.domain.ports import ClaimingLeases, TaskLeases
from ultimate_rag.services.leases import LeasedRunner, OneAtATime, Outcome


@dataclass
class MemoryLeases:
    alive: bool = True
    due: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    beats: int = 0
    renewed: asyncio.Event = field(default_factory=asyncio.Event)

    async def claim(self, worker_id: str) -> str | None:
        return self.due.pop(0) if self.due else None

    async def heartbeat(self, lease: str) -> bool:
        self.beats += 1
        self.renewed.set()
        return self.alive

    async def fail(self, lease: str, error: BaseException) -> None:
        if not self.alive:
            raise LeaseLostError("gone")
        self.failed.append((lease, str(error)))

    async def release(self, lease: str) -> None:
        self.released.append(lease)


def runner(leases: MemoryLeases) -> LeasedRunner[str]:
    return LeasedRunner(leases, heartbeat_seconds=0.01, label=lambda lease: f"task {lease}")


def test_the_memory_queue_implements_the_lease_ports() -> None:
    assert isinstance(MemoryLeases(), TaskLeases)
    _: ClaimingLeases[str] = MemoryLeases()


async def test_work_that_ends_is_done_and_heartbeats_while_it_runs() -> None:
    leases = MemoryLeases()

    async def work() -> None:
        await leases.renewed.wait()  # at least one renewal happened while the work ran

    assert await runner(leases).run("a", work) == Outcome.DONE
    assert leases.beats >= 1 and not leases.failed and not leases.released


async def test_a_failure_is_recorded_through_the_queue() -> None:
    leases = MemoryLeases()

    async def work() -> None:
        raise ValueError("broken input")

    assert await runner(leases).run("a", work) == Outcome.FAILED
    assert leases.failed == [("a", "broken input")]


async def test_a_lost_lease_cancels_the_work_and_writes_nothing() -> None:
    leases = MemoryLeases(alive=False)
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    assert await runner(leases).run("a", work) == Outcome.LOST
    assert cancelled.is_set() and not leases.failed and not leases.released


async def test_lease_lost_raised_by_the_work_or_the_failure_is_lost() -> None:
    leases = MemoryLeases()

    async def fenced_out() -> None:
        raise LeaseLostError("no longer owns")

    assert await runner(leases).run("a", fenced_out) == Outcome.LOST
    leases.alive = False

    async def broken() -> None:
        raise ValueError("x")

    assert await LeasedRunner(leases, heartbeat_seconds=60, label=str).run("b", broken) == Outcome.LOST


async def test_cancelling_hands_the_lease_back_and_reraises() -> None:
    leases = MemoryLeases()
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(runner(leases).run("a", work))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert leases.released == ["a"] and not leases.failed


async def test_one_at_a_time_runs_due_leases_then_stops_and_hands_back_on_stop() -> None:
    leases = MemoryLeases(due=["a", "b"])
    ran: list[str] = []

    async def work(lease: str) -> None:
        ran.append(lease)

    loop = OneAtATime(leases, runner(leases), work, poll_interval_seconds=0.01, what="task")
    assert await loop.run_until_idle("w") == 2 and ran == ["a", "b"]

    stop = asyncio.Event()
    started = asyncio.Event()

    async def forever(lease: str) -> None:
        started.set()
        await asyncio.Event().wait()

    leases.due = ["c"]
    periodic = asyncio.create_task(OneAtATime(leases, runner(leases), forever, poll_interval_seconds=0.01,
                                              what="task").run_periodically("w", stop))
    await started.wait()
    stop.set()
    await periodic
    assert leases.released == ["c"]

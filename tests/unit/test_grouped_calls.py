"""Group commit: calls that arrive while a statement is in flight share the next one."""

from __future__ import annotations

import asyncio

import pytest

from ultimate_rag.adapters.postgres.batching import GroupedCalls


class Recorder:
    """Stands in for a database statement: records each batch and holds it until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.fail_on: int | None = None

    async def run(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        self.started.set()
        await self.release.wait()
        if self.fail_on in items:
            raise RuntimeError("the statement failed")
        return [i * 10 for i in items]


async def test_calls_arriving_while_one_is_in_flight_go_together_in_the_next() -> None:
    rec = Recorder()
    grouped: GroupedCalls[int, int] = GroupedCalls(rec.run)
    first = asyncio.create_task(grouped.submit(1))
    await rec.started.wait()  # the first call is in flight, alone
    rest = [asyncio.create_task(grouped.submit(i)) for i in (2, 3, 4)]
    await asyncio.sleep(0)  # let them queue
    rec.release.set()
    assert await first == 10
    assert [await t for t in rest] == [20, 30, 40]
    assert rec.batches == [[1], [2, 3, 4]]


async def test_a_lone_call_runs_at_once_and_batches_are_capped() -> None:
    rec = Recorder()
    rec.release.set()
    grouped: GroupedCalls[int, int] = GroupedCalls(rec.run, max_batch=2)
    assert await grouped.submit(7) == 70
    assert await asyncio.gather(*(grouped.submit(i) for i in range(5))) == [0, 10, 20, 30, 40]
    assert rec.batches[0] == [7] and all(len(b) <= 2 for b in rec.batches)


async def test_a_failed_statement_fails_its_own_callers_only() -> None:
    rec = Recorder()
    rec.fail_on = 2
    grouped: GroupedCalls[int, int] = GroupedCalls(rec.run)
    first = asyncio.create_task(grouped.submit(1))
    await rec.started.wait()
    second = asyncio.create_task(grouped.submit(2))
    await asyncio.sleep(0)
    rec.release.set()
    assert await first == 10
    with pytest.raises(RuntimeError, match="the statement failed"):
        await second
    assert await grouped.submit(3) == 30  # the next call is not affected

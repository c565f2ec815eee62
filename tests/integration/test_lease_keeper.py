"""The lease keeper (adapters/postgres/lease_keeper.py) on the real database: job leases renewed
on a thread with its own connection whatever the event loop is doing, fenced like every write; a
lease taken away is reported on the loop; a hung loop's leases are left to expire; a job row held
by the job's own transaction is not a loss."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import httpx
import pytest

from ultimate_rag.adapters.postgres.lease_keeper import JobLeaseKeeping, LeaseKeeper
from ultimate_rag.domain.models import Lease


async def claimed(client: httpx.AsyncClient, container) -> Lease:
    kb = (await client.post("/api/knowledge-bases", json={"name": "keeper"})).json()["id"]
    await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("k.txt", b"Keep me alive.")})
    leases = await container.infra.queue.claim("keeper-test-worker", 1)
    assert len(leases) == 1
    return leases[0]


def keeping(container, interval: float, stall: float = 30.0) -> JobLeaseKeeping:
    keeper = JobLeaseKeeping(container.infra.queue.db.url, interval=interval, lease_seconds=stall)
    keeper.start()
    return keeper


async def test_a_lease_is_renewed_while_the_event_loop_cannot_run(client: httpx.AsyncClient, container) -> None:
    lease = await claimed(client, container)
    keeper = keeping(container, interval=0.1)
    lost: list[int] = []
    try:
        stop = keeper.keep(lease, lambda: lost.append(1))
        before = keeper.keeper.renewals
        time.sleep(1.5)  # noqa: ASYNC251 - the loop is held (a starved or busy event loop): the thread renews anyway
        renewed = keeper.keeper.renewals - before
        stop()
        assert renewed >= 3 and not lost
        assert await container.infra.queue.heartbeat(lease)  # still ours
    finally:
        keeper.close()


async def test_a_lease_taken_away_is_reported_on_the_event_loop(client: httpx.AsyncClient, container) -> None:
    lease = await claimed(client, container)
    keeper = keeping(container, interval=0.05)
    told = asyncio.Event()
    threads: list[int] = []

    def on_lost() -> None:
        threads.append(threading.get_ident())
        told.set()

    try:
        keeper.keep(lease, on_lost)
        await container.infra.db.execute("UPDATE ingestion_jobs SET locked_by = 'someone-else' WHERE id = %(id)s",
                                   {"id": lease.job_id})
        await asyncio.wait_for(told.wait(), 30)
        assert threads == [threading.get_ident()]  # called on the loop's thread, once
        await asyncio.sleep(0.3)
        assert len(threads) == 1
    finally:
        keeper.close()


async def test_a_hung_event_loop_lets_its_leases_expire(client: httpx.AsyncClient, container,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    lease = await claimed(client, container)
    keeper = LeaseKeeper(container.infra.queue.db.url, interval=0.1, stall_seconds=2.0)
    keeper.start()
    try:
        with caplog.at_level(logging.WARNING):
            keeper.keep("UPDATE ingestion_jobs SET locked_at = now() WHERE id = %(id)s RETURNING id",
                        {"id": lease.job_id}, lambda: None)
            time.sleep(3.5)  # noqa: ASYNC251 - no tick for longer than stall_seconds: the loop is taken for hung
            during = keeper.renewals
            time.sleep(0.5)  # noqa: ASYNC251 - still held
            assert keeper.renewals == during  # nothing renewed any more
        assert any("has not run" in r.getMessage() for r in caplog.records)
        await asyncio.sleep(1.2)  # the loop ticks again: renewals resume
        assert keeper.renewals > during
    finally:
        keeper.close()


async def test_a_job_row_held_by_the_jobs_own_transaction_is_no_loss(client: httpx.AsyncClient, container) -> None:
    lease = await claimed(client, container)
    keeper = keeping(container, interval=0.05)
    lost: list[int] = []
    try:
        keeper.keep(lease, lambda: lost.append(1))
        async with container.infra.queue.fenced(lease):  # the job's own fenced transaction holds the row
            await asyncio.sleep(1.0)
        renewals = keeper.keeper.renewals
        await asyncio.sleep(1.5)  # retried a second later, once the row is free
        assert keeper.keeper.renewals > renewals and not lost
    finally:
        keeper.close()

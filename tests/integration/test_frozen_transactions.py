"""A worker frozen inside a transaction (SIGSTOP, a paused machine) must not hold its job's rows
for as long as it stays frozen: the server ends a worker's transaction that waits past its limit
for the next statement, another worker takes the job over, and the frozen one, resumed, commits
nothing. Work outside the database inside such a transaction (vectors written, objects removed)
keeps the transaction open meanwhile."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from uuid import UUID

import pytest

from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.adapters.postgres.queue import JobQueue
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.errors import DatabaseError
from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually, eventually_sync

from .helpers import new_kb, queue_document

# the frozen worker: claims the job, opens its fenced transaction, writes in it, then stops itself
# inside the transaction; resumed, it tries to commit and reports what happened
FROZEN_WORKER = textwrap.dedent("""
    import asyncio, json, os, signal, sys
    from ultimate_rag.adapters.postgres.queue import JobQueue, queue_database

    async def main(url):
        queue = JobQueue(queue_database(url, max_size=2, idle_transaction_timeout=1.0), lease_seconds=1.0)
        await queue.db.open()
        [lease] = await queue.claim("frozen-worker")
        outcome = "committed"
        try:
            async with queue.fenced(lease) as (conn, _):
                await conn.execute("UPDATE documents SET progress = '{\\"late\\": true}' WHERE id = %s",
                                   (lease.document_id,))
                print(json.dumps({"inside": str(lease.document_id)}), flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
        except Exception as exc:
            outcome = type(exc).__name__
        print(json.dumps({"outcome": outcome}), flush=True)
        await queue.db.close()

    asyncio.run(main(sys.argv[1]))
""")


async def test_a_frozen_workers_transaction_ends_and_another_worker_takes_the_job(container, db_url) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "The ferry leaves at nine.")
    frozen = subprocess.Popen(  # noqa: ASYNC220 - started once; the test then waits on it on purpose
        [sys.executable, "-c", FROZEN_WORKER, db_url], stdout=subprocess.PIPE, text=True)
    try:
        assert frozen.stdout is not None
        assert json.loads(frozen.stdout.readline()) == {"inside": str(doc)}
        eventually_sync(lambda: _stopped(frozen.pid), timeout=30)

        # without the server's limit the job row stays locked and every claim skips it
        other = JobQueue(container.infra.queue.db, lease_seconds=1.0, retry_delay_seconds=0.01)
        leases = await eventually(lambda: other.claim("second-worker"), timeout=60)
        assert [x.document_id for x in leases] == [doc] and leases[0].attempt == 2

        os.kill(frozen.pid, signal.SIGCONT)
        outcome = json.loads(frozen.stdout.readline())["outcome"]
        assert frozen.wait(timeout=30) == 0
    finally:
        if frozen.poll() is None:
            os.kill(frozen.pid, signal.SIGKILL)
            frozen.wait()
    assert outcome != "committed"
    row = await container.infra.db.fetchone("SELECT d.progress, j.locked_by FROM documents d JOIN ingestion_jobs j"
                                      " ON j.document_id = d.id WHERE d.id = %s", (doc,))
    assert row is not None and "late" not in row["progress"] and row["locked_by"] == "second-worker"


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.fixture
async def short_limit_db(db_url):
    db = Database(db_url, max_size=2, idle_transaction_timeout=1.0)
    await db.open()
    yield db
    await db.close()


async def _progress(db: Database, doc: UUID) -> dict:
    row = await db.fetchone("SELECT progress FROM documents WHERE id = %s", (doc,))
    assert row is not None
    return row["progress"]


async def test_outside_work_keeps_its_transaction_open_past_the_limit(container, short_limit_db) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    write = "UPDATE documents SET progress = %s::jsonb WHERE id = %s"

    async with short_limit_db.transaction() as conn:
        await conn.execute(write, ('{"kept": 1}', doc))
        async with short_limit_db.kept_open(conn):
            await asyncio.sleep(3)  # the outside work: three times the server's limit
        await conn.execute(write, ('{"kept": 2}', doc))
    assert await _progress(container.infra.db, doc) == {"kept": 2}

    # the control: the same pause without kept_open ends the transaction, nothing of it commits
    with pytest.raises(DatabaseError):  # the driver's error, as the adapters raise it
        async with short_limit_db.transaction() as conn:
            await conn.execute(write, ('{"kept": 3}', doc))
            await asyncio.sleep(3)
            await conn.execute(write, ('{"kept": 4}', doc))
    assert await _progress(container.infra.db, doc) == {"kept": 2}


async def test_the_products_pools_carry_the_limit(settings: Settings, embedder) -> None:
    assert Settings(lease_seconds=3).idle_transaction_seconds == 30.0
    assert Settings(lease_seconds=120).idle_transaction_seconds == 120.0
    container = build(settings, embedder=embedder)
    await container.open()
    try:
        for db in (container.infra.db, container.infra.queue.db):
            row = await db.fetchone("SHOW idle_in_transaction_session_timeout")
            assert row is not None and row["idle_in_transaction_session_timeout"] == "30s"
    finally:
        await container.close()
    assert Database("postgresql:///x").idle_transaction_timeout is None  # a bare pool: no limit

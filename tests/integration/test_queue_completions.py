"""The queue's hot path against a real server: grouped completions stay fenced, concurrent
claimers never share a job, the claim's generic plan stays on its indexes, and the queue's pool
trusts a connection used a moment ago."""

from __future__ import annotations

import asyncio
import re

import psycopg
from psycopg_pool import AsyncConnectionPool

from ultimate_rag.adapters.postgres.database import Connection, Database
from ultimate_rag.adapters.postgres.queue import Q, queue_database
from ultimate_rag.domain.errors import LeaseLostError
from ultimate_rag.services.lifecycle import BulkReindexFilter
from ultimate_rag.testing.eventually import eventually

from .helpers import job_row, new_kb, queue_document


async def _ready(container, docs) -> None:
    """Documents already READY: their jobs only have to be claimed and completed."""
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = ANY(%s)", (list(docs),))


async def test_grouped_completions_end_only_the_jobs_still_owned(container) -> None:
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"text {i}") for i in range(4)]
    await _ready(container, [docs[0], docs[1], docs[3]])  # docs[2] is not READY
    leases = {lease.document_id: lease for lease in await container.infra.queue.claim("worker-a", 4)}
    assert set(leases) == set(docs)
    # docs[1]'s job was taken over by another worker (its lease was lost and reclaimed)
    await container.infra.db.execute("UPDATE ingestion_jobs SET locked_by = 'worker-b', attempts = attempts + 1"
                               " WHERE document_id = %s", (docs[1],))
    stolen_before = await job_row(container, docs[1])

    outcomes = await asyncio.gather(*(container.ingest.pipeline.complete_already_ready(leases[d]) for d in docs),
                                    return_exceptions=True)

    assert outcomes[0] is None and outcomes[3] is None
    assert isinstance(outcomes[1], LeaseLostError)
    assert isinstance(outcomes[2], LeaseLostError) and "not READY" in str(outcomes[2])
    done = [await job_row(container, docs[i]) for i in (0, 3)]
    assert all(r["status"] == "SUCCEEDED" and r["locked_by"] is None for r in done)
    # the concurrent completions went together: one statement, one commit time
    assert done[0]["finished_at"] == done[1]["finished_at"]
    assert await job_row(container, docs[1]) == stolen_before  # a lost lease never completes
    pending = await job_row(container, docs[2])
    assert (pending["status"], pending["locked_by"]) == ("RUNNING", "worker-a")


async def test_concurrent_claimers_with_grouped_completions_run_each_job_once(container) -> None:
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"text {i}") for i in range(60)]
    await _ready(container, docs)
    claimed: list[object] = []

    async def claimer(n: int) -> None:
        while leases := await container.infra.queue.claim(f"w{n}", limit=3):
            claimed.extend(lease.job_id for lease in leases)
            await asyncio.gather(*(container.ingest.pipeline.complete_already_ready(lease) for lease in leases))

    await asyncio.gather(*(claimer(n) for n in range(8)))
    assert len(claimed) == len(set(claimed)) == len(docs)
    rows = await container.infra.db.fetchall("SELECT status, attempts FROM ingestion_jobs")
    assert len(rows) == len(docs)
    assert all(r["status"] == "SUCCEEDED" and r["attempts"] == 1 for r in rows)


async def test_the_claims_generic_plan_never_reads_the_whole_jobs_table(container) -> None:
    """The queue's pool plans each statement once for any parameters (generic plans); a plan that
    cannot see the claim's LIMIT must still touch only the claimed rows."""
    kb = await new_kb(container)
    await container.infra.db.execute(
        "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key, status)"
        " SELECT gen_random_uuid(), %s, 'f', 'text/plain', 1, 'x', 'k', 'READY' FROM generate_series(1, 20000)",
        (kb,))
    # a backlog (every 4th job still queued) beside the history
    await container.infra.db.execute(
        "INSERT INTO ingestion_jobs (id, document_id, status, attempts, max_attempts)"
        " SELECT gen_random_uuid(), id, CASE WHEN random() < 0.25 THEN 'PENDING' ELSE 'SUCCEEDED' END, 0, 3"
        " FROM documents")
    await container.infra.db.execute("ANALYZE ingestion_jobs")
    await container.infra.db.execute("ANALYZE documents")
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    generic = re.sub(r"%\((\w+)\)s", placeholder, Q["claim"])
    async with container.infra.db.connection() as conn:
        plan = await (await conn.execute("EXPLAIN (GENERIC_PLAN) " + generic)).fetchall()
    text = "\n".join(r["QUERY PLAN"] for r in plan)
    assert "Seq Scan on ingestion_jobs" not in text and "Seq Scan on documents" not in text, text


async def _backend_pid(db: Database) -> int:
    row = await db.fetchone("SELECT pg_backend_pid() AS pid")
    assert row is not None
    return int(row["pid"])


async def test_a_pool_hands_out_a_quiet_connection_without_a_round_trip_and_replaces_an_ended_one(
        container, monkeypatch) -> None:
    """No check round trip for a connection that is idle with nothing from the server pending; a
    connection the server ended (a restart, an administrator) has its goodbye pending, so the pool's
    full check runs, fails, and the caller gets a new connection instead of an error: in the
    queue's pool (generic plans) and in the general one alike."""
    checks: list[object] = []
    original = AsyncConnectionPool.check_connection

    async def counted(conn: Connection) -> None:
        checks.append(conn)
        await original(conn)

    monkeypatch.setattr(AsyncConnectionPool, "check_connection", staticmethod(counted))
    url = container.infra.queue.db.url
    for db in (queue_database(url, max_size=1), Database(url, max_size=1)):
        await db.open()
        try:
            pid = await _backend_pid(db)
            checks.clear()
            for _ in range(3):
                assert await db.ping()
            assert checks == []  # quiet: handed out as it is
            await container.infra.db.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))  # returns once it ended
            assert await db.ping()  # no error: the ended connection was checked and replaced
            assert len(checks) == 1
            assert await _backend_pid(db) != pid
        finally:
            await db.close()


async def test_grouped_completions_lock_job_rows_in_the_order_a_bulk_operation_does(container, db_url) -> None:
    """The interleaving that deadlocks when two statements lock the same job rows in different
    orders: a bulk reindex waits for job A (held by a third transaction) and completions of A and B
    are queued behind it. Locking B first (job id order, where B's id sorts first) they would hold B
    while the bulk, once it has A, waits for B: a deadlock. Locking in document order, as the bulk
    does, they wait for A first, holding nothing, and the two go one after the other."""
    kb = await new_kb(container)
    first, second = sorted([await queue_document(container, kb, "text a"), await queue_document(container, kb, "text b")])
    # job ids that sort the other way round from their documents
    for job_id, document_id in (("ffffffff-0000-4000-8000-000000000000", first),
                                ("00000000-0000-4000-8000-000000000000", second)):
        await container.infra.db.execute("UPDATE ingestion_jobs SET id = %s WHERE document_id = %s", (job_id, document_id))
    leases = {lease.document_id: lease for lease in await container.infra.queue.claim("worker-a", 2)}
    await _ready(container, [first, second])

    async def waiting_on_locks() -> int:
        row = await container.infra.db.fetchone("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                          " AND datname = current_database()")
        return int(row["n"]) if row else 0

    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        await holder.execute("SELECT 1 FROM ingestion_jobs WHERE document_id = %s FOR UPDATE", (first,))
        bulk = asyncio.create_task(container.ingest.lifecycle.bulk_reindex(kb, BulkReindexFilter.ALL))
        await eventually(waiting_on_locks, lambda n: n >= 1, timeout=30)
        completions = asyncio.gather(*(container.ingest.pipeline.complete_already_ready(leases[d]) for d in (first, second)),
                                     return_exceptions=True)
        await eventually(waiting_on_locks, lambda n: n >= 2, timeout=30)
        await holder.rollback()
    outcomes = await asyncio.wait_for(completions, timeout=60)
    queued, _ = await asyncio.wait_for(bulk, timeout=60)  # a deadlock error would end the bulk or the completions
    # the bulk went first: it queued both documents again, so their old jobs' completions are fenced out
    assert queued == 2
    assert all(isinstance(o, LeaseLostError) for o in outcomes), outcomes

"""Queue throughput: no-op jobs claimed and completed per second through the product's own queue
(claim with lease and attempts, exhausted-lease convergence, fenced completion) on the embedded
PostgreSQL, with 1, 4 and 16 concurrent claimers.

    .venv/bin/python -m bench.queue [--jobs 20000] [--claimers 1,4,16] [--processes 1] [--batch 1]
                                    [--finished 1000000] [--no-pgbench]

Beside each claimer count, pgbench runs the minimal two-statement job (``bench/pgbench_queue.py``)
with as many clients on the same server, so the ratio to PostgreSQL's own limit is taken in one run.

``--finished N`` first fills the jobs table with N finished jobs (SUCCEEDED, their documents
READY), to show the claim does not slow down as history accumulates.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import resource
import time
from uuid import uuid4

from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.adapters.postgres.pipeline import PipelineRepository
from ultimate_rag.adapters.postgres.queue import JobQueue, queue_database
from ultimate_rag.worker import run_event_loop

from . import pgbench_queue
from .common import fresh_database, machine


async def seed_history(db: Database, finished: int) -> None:
    kb = uuid4()
    await db.execute("INSERT INTO knowledge_bases (id, name) VALUES (%s, 'history')", (kb,))
    for start in range(0, finished, 100_000):
        n = min(100_000, finished - start)
        await db.execute(
            "WITH d AS (INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256,"
            " object_key, status, created_at) SELECT gen_random_uuid(), %s, 'old', 'text/plain', 1, 'x', 'k',"
            " 'READY', now() - interval '30 days' FROM generate_series(1, %s) RETURNING id)"
            " INSERT INTO ingestion_jobs (id, document_id, status, attempts, max_attempts, available_at, created_at,"
            " finished_at) SELECT gen_random_uuid(), id, 'SUCCEEDED', 1, 3, now() - interval '30 days',"
            " now() - interval '30 days', now() - interval '30 days' FROM d", (kb, n))
    await db.execute("VACUUM ANALYZE ingestion_jobs")


async def seed(db: Database, jobs: int) -> None:
    kb = uuid4()
    await db.execute("DELETE FROM knowledge_bases WHERE name = 'bench'")
    await db.execute("INSERT INTO knowledge_bases (id, name) VALUES (%s, 'bench')", (kb,))
    # documents already READY: the no-op job only has to be claimed and completed
    await db.execute(
        "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key, status)"
        " SELECT gen_random_uuid(), %s, 'f', 'text/plain', 1, 'x', 'k', 'READY' FROM generate_series(1, %s)",
        (kb, jobs))
    await db.execute(
        "INSERT INTO ingestion_jobs (id, document_id, status, max_attempts, available_at)"
        " SELECT gen_random_uuid(), id, 'PENDING', 3, now() - interval '1 minute' FROM documents"
        " WHERE knowledge_base_id = %s", (kb,))
    await db.execute("VACUUM ANALYZE ingestion_jobs")
    await db.execute("VACUUM ANALYZE documents")


async def claim_loop(queue: JobQueue, pipeline: PipelineRepository, worker_id: str, batch: int) -> int:
    done = 0
    while True:
        leases = await queue.claim(worker_id, batch)
        if not leases:
            return done
        # each claimed job runs in its own task, as in the worker; their completions are grouped
        await asyncio.gather(*(pipeline.complete_already_ready(lease) for lease in leases))
        done += len(leases)


class _NoVectors:
    async def delete_by_document(self, document_id: object) -> None:
        return None


async def run_claimers(url: str, claimers: int, batch: int, tag: str) -> int:
    db = queue_database(url, min_size=claimers, max_size=claimers + 1)
    await db.open()
    queue = JobQueue(db, lease_seconds=60)
    pipeline = PipelineRepository(queue, _NoVectors())  # READY documents only: no twin is ever outdated
    try:
        counts = await asyncio.gather(*(claim_loop(queue, pipeline, f"{tag}-{i}", batch) for i in range(claimers)))
    finally:
        await db.close()
    return sum(counts)


def _process(url: str, claimers: int, batch: int, tag: str, out: mp.Queue) -> None:
    out.put(run_event_loop(run_claimers(url, claimers, batch, tag)))


def measure(url: str, server: object, jobs: int, claimers: int, processes: int, batch: int) -> tuple[float, str]:
    asyncio.run(_seed(url, jobs))
    meter = CpuMeter(server)
    started = time.perf_counter()
    if processes == 1:
        done = run_event_loop(run_claimers(url, claimers, batch, "p0"))  # the worker process's loop
    else:
        out: mp.Queue = mp.Queue()
        procs = [mp.Process(target=_process, args=(url, claimers, batch, f"p{i}", out)) for i in range(processes)]
        for p in procs:
            p.start()
        done = sum(out.get() for _ in procs)
        for p in procs:
            p.join()
    elapsed = time.perf_counter() - started
    assert done == jobs, (done, jobs)
    return jobs / elapsed, meter.per_job(jobs)


class CpuMeter:
    """Milliseconds of CPU per job, split into the server's and the client's (this process and
    the children it waited for: claimer processes, pgbench)."""

    def __init__(self, server: object) -> None:
        self._server = server
        self._start = self._now()

    def _now(self) -> tuple[float, float]:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (pgbench_queue.server_cpu_seconds(self._server),
                time.process_time() + children.ru_utime + children.ru_stime)

    def per_job(self, jobs: int) -> str:
        (server0, client0), (server1, client1) = self._start, self._now()
        return (f"server {1000 * (server1 - server0) / jobs:.3f} ms CPU/job, "
                f"client {1000 * (client1 - client0) / jobs:.3f} ms CPU/job")


async def _seed(url: str, jobs: int) -> None:
    await _with_db(url, lambda db: seed(db, jobs))


async def _with_db(url: str, action) -> None:
    db = Database(url, max_size=2)
    await db.open()
    try:
        await action(db)
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--claimers", default="1,4,16")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1, help="jobs fetched per claim")
    parser.add_argument("--finished", type=int, default=0, help="finished jobs already in the table")
    parser.add_argument("--no-pgbench", action="store_true", help="skip the side-by-side pgbench run")
    args = parser.parse_args()
    url, server, _ = fresh_database()
    print(f"machine: {machine()}")
    if args.finished:
        started = time.perf_counter()
        asyncio.run(_with_db(url, lambda db: seed_history(db, args.finished)))
        print(f"seeded {args.finished:,} finished jobs in {time.perf_counter() - started:.0f} s", flush=True)
    for n in (int(x) for x in args.claimers.split(",")):
        rate, cpu = measure(url, server, args.jobs, n, args.processes, args.batch)
        print(f"RESULT queue: {args.processes} process(es) x {n} claimers, batch {args.batch}: "
              f"{rate:,.0f} jobs/s ({args.jobs} no-op jobs, {args.finished:,} finished jobs in the table; {cpu})", flush=True)
        if not args.no_pgbench:
            clients = n * args.processes  # as many connections as claimers in all
            limit, cpu = pgbench_queue.measure(url, args.jobs, clients, lambda: CpuMeter(server))
            print(f"RESULT queue pgbench: {clients} clients: {limit:,.0f} jobs/s, the same two-statement job on the same "
                  f"server ({cpu}); ours / PostgreSQL's limit = {rate / limit:.2f}", flush=True)
    server.cleanup()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()

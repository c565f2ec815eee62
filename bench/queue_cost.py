"""The database's cost per document through the whole pipeline, for sizing one PostgreSQL server
(``docs/deployment.md``): the product's worker ingests the shared corpus with an embedder whose
vectors cost nothing (every other step real and durable: claim, stage writes, progress, parser,
assets, snapshot, dedup, embedding cache, vectors, chunks, the READY commit), and this reports per
document: statements, round trips, transactions and milliseconds of server CPU, plus the cost of
one heartbeat.

    .venv/bin/python -m bench.queue_cost [--per-lang 40] [--concurrency 4] [--heartbeats 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg

from ultimate_rag.adapter_factories import make_embedder
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings, ReadyCommit
from ultimate_rag.domain.status import DocumentStatus
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings

from . import pgbench_queue
from .common import fresh_database, load_corpus, machine
from .queue import CpuMeter


class FreeVectors:
    """The local model's name, size and tokenizer (the chunker counts tokens with it), but
    vectors that cost nothing: a unit vector picked by a hash of the text."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.name, self.dimension, self.max_tokens = real.name, real.dimension, real.max_tokens

    def count_tokens(self, text: str) -> int:
        return int(self._real.count_tokens(text))

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dimension
        v[int(hashlib.blake2b(text.encode(), digest_size=4).hexdigest(), 16) % self.dimension] = 1.0
        return v

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class StatementCounter:
    """Counts what the client sends: statements and round trips (an ``executemany`` is pipelined:
    one round trip for all its rows) and explicit transactions (BEGIN + COMMIT: two more)."""

    def __init__(self) -> None:
        self.statements = self.round_trips = self.transactions = 0
        cursor, conn = psycopg.AsyncCursor, psycopg.AsyncConnection
        execute, executemany, transaction = cursor.execute, cursor.executemany, conn.transaction
        counter = self

        async def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
            kind = counter.kind(args[0])
            counter.statements += 1
            counter.round_trips += 1
            backend = self.connection.pgconn.backend_pid
            before = _on_cpu_ns(backend)
            try:
                return await execute(self, *args, **kwargs)
            finally:
                spent = _on_cpu_ns(backend) - before
                counter.server_ns[kind] += spent
                counter.samples.setdefault(kind, []).append(spent)

        async def counted_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
            params_seq = list(params_seq)
            counter.kind(query)
            counter.statements += len(params_seq)
            counter.round_trips += 1
            return await executemany(self, query, params_seq, **kwargs)

        def counted_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
            counter.transactions += 1
            return transaction(self, *args, **kwargs)

        cursor.execute, cursor.executemany = counted_execute, counted_executemany  # type: ignore[method-assign]
        conn.transaction = counted_transaction  # type: ignore[method-assign]

        self.kinds: Counter[str] = Counter()
        self.server_ns: Counter[str] = Counter()  # the backend's CPU while the statement ran, by kind
        self.samples: dict[str, list[int]] = {}

    def kind(self, query: Any) -> str:
        text = query if isinstance(query, str) else str(getattr(query, "_obj", query))
        words = " ".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).split()
        kind = " ".join(words[:4])[:48]
        self.kinds[kind] += 1
        return kind

    def snapshot(self) -> tuple[int, int, int]:
        return self.statements, self.round_trips, self.transactions


async def main_async(args: argparse.Namespace) -> None:
    docs = load_corpus().make_corpus(per_lang=args.per_lang)
    url, server, root = fresh_database()
    settings = Settings(database_url=url, data_dir=root / "data", admin_key="bench-admin-key",
                        sparse_enabled=not args.no_sparse)  # the product's poll interval
    container = build(settings, url=url, embedder=FreeVectors(make_embedder(settings)))
    await container.open()
    container.embedding.embedder.count_tokens("warm up")  # load the tokenizer before the clock starts
    kb = await container.ingest.knowledge_bases.create("bench", "", KnowledgeBaseSettings())
    for d in docs:
        doc_id, data = uuid4(), d["text"].encode()
        key = f"{kb.id}/{doc_id}/source.txt"
        await container.infra.storage.put(key, data, "text/plain")
        await container.ingest.documents.create_with_job(
            document_id=doc_id, knowledge_base_id=kb.id, filename=f"{d['id']}.txt", mime_type="text/plain",
            size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), object_key=key, max_attempts=3)
    counter = StatementCounter()
    meter, before = CpuMeter(server), counter.snapshot()
    started = time.perf_counter()
    stop = asyncio.Event()
    worker = container.worker(WorkerConfig(concurrency=args.concurrency, heartbeat_seconds=3600,
                                           poll_interval_seconds=settings.poll_interval_seconds))
    run = asyncio.create_task(worker.run(stop))
    await asyncio.to_thread(_wait_all_ready, url, len(docs))
    wall = time.perf_counter() - started
    stop.set()
    await run
    cost = meter.per_job(len(docs))
    statements, trips, transactions = (b - a for a, b in zip(before, counter.snapshot(), strict=True))
    chunks = (await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks"))["n"]  # type: ignore[index]

    kinds = counter.kinds.most_common(args.top)
    server_ns, samples = dict(counter.server_ns), {k: list(v) for k, v in counter.samples.items()}

    # the lease path alone: what the queue itself writes for a document, without the data
    lease_docs = [await _queue_one(container, kb.id, i) for i in range(args.lease_docs)]
    await container.infra.db.execute("VACUUM ANALYZE ingestion_jobs")
    lease_meter = CpuMeter(server)
    leases = []
    while claimed := await container.infra.queue.claim("lease-bench", args.concurrency):
        leases.extend(claimed)
        await asyncio.gather(*(_lease_path(container.ingest.pipeline, lease) for lease in claimed))
    assert len(leases) == len(lease_docs)
    lease_cost = lease_meter.per_job(len(lease_docs))

    # one heartbeat, alone: its cost per call on a claimed job
    await container.infra.db.execute("UPDATE documents SET status = 'PENDING' WHERE id = (SELECT id FROM documents ORDER BY id LIMIT 1)")
    await container.infra.db.execute("UPDATE ingestion_jobs SET status = 'PENDING', attempts = 0, available_at = now()"
                               " WHERE document_id = (SELECT id FROM documents ORDER BY id LIMIT 1)")
    [lease] = await container.infra.queue.claim("heartbeat-bench", 1)
    hb_meter = CpuMeter(server)
    for _ in range(args.heartbeats):
        assert await container.infra.queue.heartbeat(lease)
    hb_cost = hb_meter.per_job(args.heartbeats)

    # the reference on the same server: pgbench's minimal two-statement job
    limit, reference = pgbench_queue.measure(url, 5000, 16, lambda: CpuMeter(server))

    n = len(docs)
    print(f"machine: {machine()}")
    print(f"corpus: {n} documents ({args.per_lang} per language), {chunks} chunks; worker concurrency "
          f"{args.concurrency}; sparse vectors {'off' if args.no_sparse else 'on'}; vectors cost nothing")
    print(f"RESULT queue cost: per document {statements / n:.1f} statements in {trips / n:.1f} round trips and "
          f"{transactions / n:.1f} explicit transactions ({chunks / n:.1f} chunks per document); {cost} "
          f"(the job includes all its statements); wall {wall:.1f} s, {n / wall:.1f} documents/s")
    print(f"RESULT queue cost: one heartbeat: {hb_cost} (one statement, one round trip)")
    print(f"RESULT queue cost: the lease path alone (claim in batches of {args.concurrency}, 4 stages (PARSING with its parser), "
          f"2 progress reports, the READY commit without chunks): {lease_cost}")
    print(f"RESULT queue cost: reference, pgbench's two-statement job on the same server at 16 clients: "
          f"{limit:,.0f} jobs/s, {reference}")
    print("statements by kind over the whole ingest (per document; the server's CPU for each, from its backend's "
          "schedstat around the round trip: ms per document, µs per statement):")
    for kind, count in kinds:
        spent = server_ns.get(kind, 0)
        xs = sorted(samples.get(kind, [0]))
        print(f"  {count / n:6.2f}  {spent / n / 1e6:6.3f} ms  {spent / count / 1e3:7.1f} µs  median {xs[len(xs) // 2] / 1e3:7.1f} p90 {xs[len(xs) * 9 // 10] / 1e3:7.1f} max {xs[-1] / 1e3:8.1f}  {kind}")
    await container.close()
    server.cleanup()  # type: ignore[attr-defined]


def _on_cpu_ns(pid: int) -> int:
    """Nanoseconds the process has run on a CPU (the scheduler's own account, not 10 ms ticks)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except OSError:
        return 0


def _wait_all_ready(url: str, expected: int) -> None:
    """Polls on its own (synchronous) connection, so its statements are not counted."""
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            counts = conn.execute("SELECT count(*) FILTER (WHERE status = 'READY'),"
                                  " count(*) FILTER (WHERE status = 'FAILED') FROM documents").fetchone()
            assert counts is not None
            ready, failed = counts
            if failed:
                raise SystemExit(f"{failed} documents FAILED")
            if ready >= expected:
                return
            time.sleep(0.25)


async def _queue_one(container: Any, kb: Any, i: int) -> Any:
    doc_id = uuid4()
    await container.ingest.documents.create_with_job(
        document_id=doc_id, knowledge_base_id=kb, filename=f"lease-{i}.txt", mime_type="text/plain", size_bytes=1,
        sha256=f"{i:064x}", object_key=f"{kb}/{doc_id}/source.txt", max_attempts=3)
    return doc_id


async def _lease_path(pipeline: Any, lease: Any) -> None:
    await pipeline.start_parsing(lease, "text", "1")
    await pipeline.enter_stage(lease, DocumentStatus.CHUNKING)
    await pipeline.enter_stage(lease, DocumentStatus.EMBEDDING, {"stage": "EMBEDDING", "done": 0, "total": 1})
    await pipeline.report_progress(lease, {"stage": "EMBEDDING", "done": 1, "total": 1})
    await pipeline.report_progress(lease, {"stage": "EMBEDDING", "done": 1, "total": 1})
    await pipeline.enter_stage(lease, DocumentStatus.INDEXING, {"stage": "INDEXING", "done": 0, "total": 1})

    async def nothing(*_: object) -> None:
        return None

    await pipeline.commit_ready(lease, ReadyCommit(chunks=(), revision=1), write_vectors=nothing,
                                finish=nothing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-lang", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--heartbeats", type=int, default=2000)
    parser.add_argument("--lease-docs", type=int, default=1000)
    parser.add_argument("--top", type=int, default=15, help="statement kinds listed")
    parser.add_argument("--no-sparse", action="store_true", help="without the learned sparse vectors")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

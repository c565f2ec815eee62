"""Near-duplicate lookup cost as a knowledge base grows: the time to find (and verify) the
candidates of one document among 1k, 10k and 100k documents' LSH bands. It must not grow linearly.

    .venv/bin/python -m bench.dedup [--sizes 1000,10000,100000] [--queries 200]

The knowledge base is filled with random signatures (what MinHash values of unrelated documents
look like: uniformly spread band hashes); each query is a near-duplicate of one stored document
(a few of its 128 values changed), so every lookup finds one true candidate and verifies it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from uuid import uuid4

from ultimate_rag.adapters.postgres import dedup as repo
from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.domain import dedup as rules

from .common import fresh_database, machine


async def grow(db: Database, kb, target: int, have: int) -> None:
    while have < target:
        n = min(20_000, target - have)
        await db.execute(
            "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,"
            " status, content_hash, minhash) SELECT gen_random_uuid(), %s, 'f.md', 'text/markdown', 1, 'x', 'k',"
            " 'READY', md5(random()::text), ARRAY(SELECT (random() * 4294967295)::bigint"
            " FROM generate_series(1, 128) WHERE g > 0) FROM generate_series(1, %s) g", (kb, n))
        await db.execute(
            "INSERT INTO document_hash_bands (document_id, knowledge_base_id, band, hash)"
            " SELECT d.id, d.knowledge_base_id, b, (random() * 9.2e18 - 4.6e18)::bigint"
            " FROM documents d CROSS JOIN generate_series(0, 31) b"
            " WHERE d.knowledge_base_id = %s AND NOT EXISTS"
            " (SELECT 1 FROM document_hash_bands x WHERE x.document_id = d.id)", (kb,))
        have += n
    await db.execute("ANALYZE documents")
    await db.execute("ANALYZE document_hash_bands")


async def lookups(db: Database, kb, queries: int, rng: random.Random) -> list[float]:
    stored = await db.fetchall(
        "SELECT d.id, d.minhash, array_agg(b.hash ORDER BY b.band) AS bands FROM documents d"
        " JOIN document_hash_bands b ON b.document_id = d.id WHERE d.knowledge_base_id = %s"
        " GROUP BY d.id, d.minhash ORDER BY random() LIMIT %s", (kb, queries))
    times = []
    for row in stored:
        values = list(row["minhash"])
        for i in rng.sample(range(128), 6):  # a near-duplicate: 6 of 128 values differ
            values[i] = rng.randrange(2**32)
        query_bands = list(enumerate(row["bands"]))
        for i in rng.sample(range(32), 5):  # ... so a few of its bands differ too
            query_bands[i] = (i, rng.randrange(-2**63, 2**63))
        started = time.perf_counter()
        async with db.transaction() as conn:
            # the knowledge base's deduplication lock, as the product's fencing statement takes it first
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (repo.lock_name(kb),))
            found = await repo.candidates(conn, knowledge_base_id=kb, document_id=uuid4(), text_hash="none",
                                          bands=query_bands, exempt=[])
            match = rules.judge(filename="q.md", text_hash="none", hashvalues=values, candidates=found,
                                mode=rules.DedupMode.NEAR, threshold=0.9)
        times.append(time.perf_counter() - started)
        assert match is not None and match.document_id == row["id"], "the planted near-duplicate was not found"
    return times


async def main_async(args: argparse.Namespace) -> None:
    url, server, _ = fresh_database()
    db = Database(url, max_size=2)
    await db.open()
    kb = uuid4()
    await db.execute("INSERT INTO knowledge_bases (id, name) VALUES (%s, 'dedup-bench')", (kb,))
    rng = random.Random(5)
    print(f"machine: {machine()}")
    have = 0
    for size in (int(s) for s in args.sizes.split(",")):
        await grow(db, kb, size, have)
        have = size
        times = await lookups(db, kb, args.queries, rng)
        print(f"RESULT dedup: {size:>7,} documents: near-duplicate lookup p50 {1000 * statistics.median(times):.2f} ms,"
              f" p95 {1000 * sorted(times)[int(0.95 * len(times))]:.2f} ms ({len(times)} lookups)", flush=True)
    await db.close()
    server.cleanup()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Hybrid candidate plans side by side (pgvector): quality and latency of other ways to find the
candidates than the product's, in one run, on the same data.

Quality on two knowledge bases: the evaluation set alone (42 one-chunk documents: any plan that
returns 50 candidates sees them all, so it cannot tell plans apart) and the evaluation set among
``--distractors`` documents per language of the shared corpus (about 500 chunks: candidate
generation matters there). Latency: ``--chunks`` synthetic chunks as in bench/retrieval, the query
vectors cached, every plan and dense mode timed on each question in a shuffled order (so no plan
always finds the buffers warmed by another).

    ULTIMATE_RAG_CORPUS=shared/bench/corpus.py .venv/bin/python -m bench.retrieval_plans

Prints ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
from pgvector import Vector

from ultimate_rag.adapters.vectors.sparse_pg import as_sparsevec
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import ScoredChunk, SearchMode
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings

from .common import fresh_database, load_corpus, machine
from .retrieval import evaluate, ingest, synthetic
from .retrieval_set.questions import QUESTIONS


def one_statement(store: Any, *, dense_factor: int = 1, sparse: int | None = None, query_terms: int | None = None,
                  sparse_scan: bool = True) -> Any:
    """Both index scans in one statement, in turn (the plan before the two-at-once one), with knobs:
    a wider dense top (``dense_factor``), fewer sparse candidates (``sparse``), the query's sparse
    vector cut to its ``query_terms`` strongest weights for the index walk (scores use all of it),
    or no sparse scan at all (the dense top re-scored by sparse similarity)."""
    table = store.table

    async def candidates(kb: UUID, query: Any, limit: int, *, mode: SearchMode,
                         filters: Any = None) -> tuple[list[ScoredChunk], bool]:
        n_dense, n_sparse = limit * dense_factor, sparse or limit
        sides = [f"d AS MATERIALIZED (SELECT chunk_id FROM {table} WHERE knowledge_base_id = %(kb)s"
                 " ORDER BY embedding <=> %(q)s LIMIT %(nd)s)"]
        if sparse_scan:
            sides.append("s AS MATERIALIZED (SELECT chunk_id FROM chunk_sparse_vectors WHERE knowledge_base_id = %(kb)s"
                         " ORDER BY embedding <=> %(qt)s LIMIT %(ns)s)")
        union = " UNION ".join(f"SELECT chunk_id FROM {side[0]}" for side in sides)
        statement = (f"WITH {', '.join(sides)}, u AS ({union}) SELECT u.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense,"
                     " COALESCE(1 - (sp.embedding <=> %(qs)s), 0) AS sparse FROM u JOIN"
                     f" {table} v ON v.chunk_id = u.chunk_id LEFT JOIN chunk_sparse_vectors sp ON sp.chunk_id = u.chunk_id")
        strongest = dict(sorted(query.sparse.items(), key=lambda kv: -kv[1])[:query_terms or len(query.sparse)])
        params = {"q": Vector(np.asarray(query.dense, dtype=np.float32)), "kb": kb, "nd": n_dense, "ns": n_sparse,
                  "qs": as_sparsevec(query.sparse), "qt": as_sparsevec(strongest)}
        async with store._db.transaction() as conn:
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            await conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(max(n_dense, n_sparse), 1000))}")
            rows = await (await conn.execute(statement, params)).fetchall()
        return [ScoredChunk(r["chunk_id"], float(r["dense"]), float(r["sparse"])) for r in rows], len(rows) < limit
    return candidates


def plans(store: Any) -> dict[str, Any]:
    return {
        "two statements at once (product)": store.candidates,
        "one statement, both scans in turn": one_statement(store),
        "dense top x2 re-scored, no sparse scan": one_statement(store, dense_factor=2, sparse_scan=False),
        "dense top x4 re-scored, no sparse scan": one_statement(store, dense_factor=4, sparse_scan=False),
        "sparse top 20": one_statement(store, sparse=20),
        "sparse query cut to 64 terms": one_statement(store, query_terms=64),
        "sparse top 20, query cut to 64 terms": one_statement(store, sparse=20, query_terms=64),
    }


async def with_distractors(container: Any, per_lang: int) -> tuple[UUID, dict[UUID, str]]:
    from .retrieval_set.build import files

    kb = await container.ingest.knowledge_bases.create("retrieval-eval-distractors", "", KnowledgeBaseSettings())
    key_of: dict[UUID, str] = {}
    for key, (filename, data) in files().items():
        key_of[(await container.ingest.ingestion.submit(kb, filename, None, data)).id] = key
    for doc in load_corpus().make_corpus(per_lang=per_lang):
        await container.ingest.ingestion.submit(kb, f"{doc['id']}.txt", None, doc["text"].encode())
    await container.worker(WorkerConfig(heartbeat_seconds=30)).run_until_idle()
    n = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks WHERE knowledge_base_id = %s", (kb.id,))
    print(f"evaluation set with distractors: {n['n']} chunks")
    return kb.id, key_of


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distractors", type=int, default=40, help="shared-corpus documents per language")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    url, server, root = fresh_database()
    settings = Settings(database_url=url, data_dir=Path(root) / "data", admin_key="bench-admin-key-0123456789")
    container = build(settings, url=url)
    await container.open()
    store: Any = container.embedding.default_index  # its candidates method is swapped for each plan
    product = store.candidates
    try:
        sets = {"eval": await ingest(container), "eval+distractors": await with_distractors(container, args.distractors)}
        for name, plan in plans(store).items():
            store.candidates = plan
            for label, (kb, key_of) in sets.items():
                s = await evaluate(container, kb, key_of, SearchMode.HYBRID)
                print(f"RESULT plans quality set={label} plan={name!r} " + " ".join(
                    f"{kind}_top1={s[kind]['top1']:.3f}" for kind in ("all", "paraphrase", "cross", "identifier"))
                    + f" mrr10={s['all']['mrr10']:.3f} recall10={s['all']['recall10']:.3f}")
        store.candidates = product
        kb = await synthetic(container, args.chunks)
        questions = [q for q, _, _ in QUESTIONS]
        for q in questions:  # the query vectors into the per-process cache
            await container.retrieval.search.search(kb, q, 10)
        runs = [(name, SearchMode.HYBRID, plan) for name, plan in plans(store).items()]
        runs.append(("dense mode", SearchMode.DENSE, product))
        samples: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.repeat):
            random.shuffle(questions)
            for q in questions:
                random.shuffle(runs)
                for name, mode, plan in runs:
                    store.candidates = plan
                    started = time.perf_counter()
                    await container.retrieval.search.search(kb, q, 10, mode=mode)
                    samples[name].append(time.perf_counter() - started)
        store.candidates = product
        dense = statistics.median(samples["dense mode"])
        for name, times in samples.items():
            print(f"RESULT plans latency chunks={args.chunks} plan={name!r} n={len(times)} "
                  f"p50_ms={statistics.median(times) * 1000:.1f} "
                  f"p95_ms={statistics.quantiles(times, n=20)[18] * 1000:.1f} "
                  f"vs_dense={statistics.median(times) / dense:.2f}")
    finally:
        await container.close()
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())

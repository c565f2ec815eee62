"""Search latency with metadata filters (SPEC §10 ``filters.metadata``) at ``--chunks`` chunks.

Real chunk vectors of the evaluation set (a few of its documents through the real pipeline, dense
and sparse), perturbed into ``--chunks`` synthetic chunks of 100 per document in one knowledge
base, each document with metadata: ``office`` (50 values), ``year`` (25), ``tags`` (7 kinds),
``doc_no``. Every question of the set is searched (hybrid, top 10, query embeddings cached: what
differs is the index and the filters) with no filter and with each filter, in a shuffled order per
question, so every variant shares the same minutes of a noisy machine.

    .venv/bin/python -m bench.retrieval_metadata [--chunks 100000] [--repeat 3] [--mode hybrid]

Prints ``RESULT`` lines: p50 / p95 per filter, its ratio to no filter, the documents it keeps, and
the plan PostgreSQL uses for the filter's document set (the GIN index on ``documents.metadata``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import time
from collections import defaultdict
from pathlib import Path
from uuid import UUID

import numpy as np

from ultimate_rag.adapters.postgres.search_filters import document_conditions
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.metadata_filter import parse
from ultimate_rag.domain.search import SearchFilters, SearchMode
from ultimate_rag.settings import Settings

from .common import fresh_database, machine
from .retrieval import ingest, synthetic
from .retrieval_set.documents import DOCUMENTS
from .retrieval_set.questions import QUESTIONS

FILTERS: dict[str, dict | None] = {
    "none": None,
    "one_document (0.1%)": {"doc_no": 123},
    "office_and_year (2%)": {"office": "office-7", "year": 2007},
    "tag (14%)": {"tags": {"$contains": "tag-3"}},
    "year_range (8%)": {"year": {"$gte": 2010, "$lt": 2012}},
    "or_of_offices (4%)": {"$or": [{"office": "office-1"}, {"office": "office-2"}]},
}


def metadata_of(n: int) -> dict:
    return {"office": f"office-{n % 50}", "year": 2000 + n % 25, "tags": [f"tag-{n % 7}", "all"], "doc_no": n}


async def plan_of(container, kb: UUID, raw: dict) -> str:
    """PostgreSQL's plan for the filter's document set (what the vector scans restrict to)."""
    conds, params = document_conditions(SearchFilters(metadata=parse(raw)))
    from psycopg import sql
    query = sql.SQL("EXPLAIN SELECT d.id FROM documents d WHERE d.knowledge_base_id = %(kb)s AND ") + \
        sql.SQL(" AND ").join(conds)
    rows = await container.infra.db.fetchall(query, {"kb": kb, **params})
    return " | ".join(r["QUERY PLAN"].strip() for r in rows)


async def latency(container, kb: UUID, repeat: int, mode: SearchMode) -> None:
    search = container.retrieval.search
    questions = [q for q, _, _ in QUESTIONS]
    filters = {name: SearchFilters(metadata=parse(raw)) if raw else None for name, raw in FILTERS.items()}
    for q in questions:  # warm: the query embeddings come from the per-process cache
        await search.search(kb, q, 10, mode=mode)
    samples: dict[str, list[float]] = defaultdict(list)
    documents: dict[str, set[UUID]] = defaultdict(set)
    short: dict[str, int] = defaultdict(int)  # searches that returned fewer than top_k
    index = container.embedding.default_index
    reruns = getattr(index, "exact_reruns", 0)
    names = list(FILTERS)
    for _ in range(repeat):
        for q in random.sample(questions, len(questions)):
            for name in random.sample(names, len(names)):
                started = time.perf_counter()
                results = await search.search(kb, q, 10, mode=mode, filters=filters[name])
                samples[name].append(time.perf_counter() - started)
                documents[name].update(r.document_id for r in results)
                short[name] += len(results) < 10
    base = statistics.median(samples["none"])
    for name in names:
        cut = statistics.quantiles(samples[name], n=20)
        print(f"RESULT retrieval_metadata mode={mode.value} filter={name!r} n={len(samples[name])} "
              f"p50_ms={statistics.median(samples[name]) * 1000:.1f} p95_ms={cut[18] * 1000:.1f} "
              f"vs_none={statistics.median(samples[name]) / base:.2f} documents_hit={len(documents[name])} "
              f"short_results={short[name]}")
    print(f"RESULT retrieval_metadata exact_reruns_all_filters={getattr(index, 'exact_reruns', 0) - reruns}")
    for name, raw in FILTERS.items():
        if raw:
            print(f"PLAN {name}: {json.dumps(raw)}: {await plan_of(container, kb, raw)}")


SETTINGS = {"planner": [], "exact": ["SET LOCAL enable_indexscan = off"],
            "hnsw": ["SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"]}


def _nodes(node: dict) -> list[str]:
    here = f"{node['Node Type']}{'(' + node['Index Name'] + ')' if 'Index Name' in node else ''}"
    return [here, *(n for child in node.get("Plans", []) for n in _nodes(child))]


async def plans(container, kb: UUID, question: str) -> None:
    """Each filter's dense and sparse side under the planner's choice, an exact scan, and a forced
    HNSW walk: execution time and the plan's top node (what the store's choice is measured against)."""
    from ultimate_rag.adapters.postgres.search_filters import vector_row_filter
    from ultimate_rag.adapters.vectors.sparse_pg import as_sparsevec, ef_search
    store = container.embedding.default_index
    search = container.retrieval.search
    _, embedder = await search._index_of(kb)
    vectors = await search._query_vectors(question, SearchMode.HYBRID, embedder)
    from pgvector import Vector
    for name, raw in FILTERS.items():
        where, params = vector_row_filter(SearchFilters(metadata=parse(raw)) if raw else None)
        params |= {"q": Vector(np.asarray(vectors.dense, dtype=np.float32)), "kb": kb, "n": 50,
                   "qs": as_sparsevec(vectors.sparse)}
        for side, statement in (("dense", store._dense_side(where, True)), ("sparse", store._sparse_side(where))):
            for label, sets in SETTINGS.items():
                async with container.infra.db.transaction() as conn:
                    await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    await conn.execute(ef_search(50))
                    for line in sets:
                        await conn.execute(line)
                    from psycopg import sql
                    rows = await (await conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + statement,
                                                     params)).fetchall()
                top = rows[0]["QUERY PLAN"][0]
                nodes = _nodes(top["Plan"])
                print(f"PLANTIME filter={name!r} side={side} settings={label} ms={top['Execution Time']:.1f} "
                      f"rows={top['Plan'].get('Actual Rows')} nodes={'>'.join(nodes[:8])}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", choices=[m.value for m in SearchMode], default="hybrid")
    parser.add_argument("--documents", type=int, default=42, help="evaluation-set documents whose vectors are used")
    parser.add_argument("--plans", action="store_true", help="also time each side's plan under three settings")
    args = parser.parse_args()
    print(machine())
    url, server, root = fresh_database()
    settings = Settings(database_url=url, data_dir=Path(root) / "data", admin_key="bench-admin-key-0123456789")
    container = build(settings, url=url)
    await container.open()
    try:
        await ingest(container, "metadata-vectors", dict(list(DOCUMENTS.items())[:args.documents]))
        kb = await synthetic(container, args.chunks, name="metadata-latency", seed=11, fields=metadata_of)
        if args.plans:
            await plans(container, kb, QUESTIONS[0][0])
        if args.repeat:
            await latency(container, kb, args.repeat, SearchMode(args.mode))
    finally:
        await container.close()
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())

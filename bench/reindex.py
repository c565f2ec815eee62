"""Search availability during a bulk reindex (SPEC §4 rule 3, §6: a rolling rebuild).

The shared corpus (several seeds of it, to reach ``--docs`` documents) is ingested by the product's
worker until every document is READY; then a bulk reindex of the knowledge base runs (the same
worker, in this process) while a sampler asks, again and again, whether a random sample of the
documents is findable by a query that targets it: the document's own first sentence, restricted to
that document (a ``document_ids`` filter), in the three search modes in turn. Findable = at least one
hit. The goal is 100 % at every sample: no document leaves search while its new revision is built.

For comparison each sample also counts the documents that are not READY at that moment: the share
the seeds' rule ("searchable = READY") would have hidden.

    .venv/bin/python -m bench.reindex [--docs 1000] [--sample 50] [--concurrency 3] [--no-sparse]

``--no-sparse``: dense vectors only (half the model's work on a CPU; the rule under test does not
depend on the vectors), sampled in the hybrid and dense modes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import time
from typing import Any
from uuid import UUID, uuid4

from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import SearchFilters, SearchMode
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.lifecycle import BulkReindexFilter
from ultimate_rag.settings import Settings

from .common import fresh_database, load_corpus, machine, wait_for_documents

MODES = [SearchMode.HYBRID, SearchMode.DENSE, SearchMode.SPARSE]


def corpus_documents(corpus: Any, n: int) -> list[dict[str, str]]:
    docs: list[dict[str, str]] = []
    seed = 0
    while len(docs) < n:
        for d in corpus.make_corpus(per_lang=100, seed=corpus.SEED + seed):
            docs.append({**d, "id": f"s{seed}-{d['id']}"})
        seed += 1
    return docs[:n]


async def findable(container, kb: UUID, doc: UUID, query: str, mode: SearchMode) -> bool:
    hits = await container.retrieval.search.search(kb, query, 3, mode=mode, filters=SearchFilters(document_ids=(doc,)))
    return bool(hits)


async def main_async(args: argparse.Namespace) -> None:
    corpus = load_corpus()
    docs = corpus_documents(corpus, args.docs)
    url, server, root = fresh_database()
    settings = Settings(database_url=url, data_dir=root / "data", poll_interval_seconds=0.2,
                        sparse_enabled=not args.no_sparse)
    modes = MODES[:2] if args.no_sparse else MODES
    container = build(settings, url=url)
    await container.open()
    container.embedding.embedder.count_tokens("warm up")
    kb = (await container.ingest.knowledge_bases.create("bench-reindex", "", KnowledgeBaseSettings())).id
    queries: dict[UUID, str] = {}
    for d in docs:
        doc_id = uuid4()
        key = f"{kb}/{doc_id}/source.txt"
        data = d["text"].encode()
        await container.infra.storage.put(key, data, "text/plain")
        await container.ingest.documents.create_with_job(
            document_id=doc_id, knowledge_base_id=kb, filename=f"{d['id']}.txt", mime_type="text/plain",
            size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), object_key=key, max_attempts=3)
        queries[doc_id] = corpus.split_sentences(d["text"])[0][:300]

    worker = container.worker(WorkerConfig(concurrency=args.concurrency, heartbeat_seconds=10,
                                           poll_interval_seconds=0.2))
    stop = asyncio.Event()
    run = asyncio.create_task(worker.run(stop))
    started = time.perf_counter()
    await wait_for_documents(container, lambda r: r["ready"] == r["n"])
    ingest_wall = time.perf_counter() - started
    counted = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks")
    assert counted is not None
    chunks = counted["n"]

    rng = random.Random(7)
    ids = list(queries)
    baseline = [await findable(container, kb, d, queries[d], modes[i % len(modes)]) for i, d in enumerate(ids)]

    samples: list[dict[str, Any]] = []
    reindex_done = asyncio.Event()

    async def sampler() -> None:
        i = 0
        while not reindex_done.is_set():
            picked = rng.sample(ids, min(args.sample, len(ids)))
            state = await container.infra.db.fetchone(
                "SELECT count(*) FILTER (WHERE status <> 'READY') AS not_ready,"
                " count(*) FILTER (WHERE published_revision = content_revision AND content_revision > 1) AS swapped"
                " FROM documents WHERE knowledge_base_id = %s", (kb,))
            assert state is not None
            found = 0
            for doc in picked:
                found += await findable(container, kb, doc, queries[doc], modes[i % len(modes)])
                i += 1
            samples.append({"found": found, "n": len(picked), **state})

    started = time.perf_counter()
    sampling = asyncio.create_task(sampler())
    queued, skipped = await container.ingest.lifecycle.bulk_reindex(kb, BulkReindexFilter.ALL)
    await wait_for_documents(container, lambda r: r["ready"] == r["n"] and _rebuilt(samples, len(ids)))
    progress = await container.ingest.lifecycle.rebuild_progress(kb)
    reindex_wall = time.perf_counter() - started
    reindex_done.set()
    await sampling
    stop.set()
    await run

    shares = [s["found"] / s["n"] for s in samples]
    during = [s for s in samples if 0 < s["swapped"] < len(ids) or s["not_ready"]]
    worst_dark = max((s["not_ready"] for s in samples), default=0)
    print(f"machine: {machine()}")
    print(f"corpus: {len(docs)} documents (shared corpus, {-(-len(docs) // 300)} seed(s)), {chunks} chunks; "
          f"worker concurrency {args.concurrency}; first ingest {ingest_wall:.1f} s; "
          f"modes sampled: {', '.join(m.value for m in modes)}")
    print(f"RESULT baseline before the reindex: {100 * sum(baseline) / len(baseline):.1f} % of {len(baseline)} "
          "READY documents findable by their own first sentence")
    print(f"RESULT bulk reindex: queued {queued}, skipped {skipped}; {reindex_wall:.1f} s until all rebuilt "
          f"(progress: {dict(progress or {})})")
    print(f"RESULT availability during the reindex: {len(samples)} samples of {args.sample} documents "
          f"({len(during)} while documents were mid-rebuild): min {100 * min(shares):.1f} %, "
          f"mean {100 * sum(shares) / len(shares):.1f} %")
    print(f"RESULT the seeds' rule (searchable = READY) would have hidden up to {worst_dark} of {len(ids)} "
          f"documents ({100 * worst_dark / len(ids):.1f} %) at one sample")
    await container.close()
    server.cleanup()  # type: ignore[attr-defined]


def _rebuilt(samples: list[dict[str, Any]], n: int) -> bool:
    return bool(samples) and samples[-1]["swapped"] == n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--no-sparse", action="store_true", help="dense vectors only (hybrid and dense sampled)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

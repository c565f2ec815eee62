"""Fairness of the queue, measured with the product's own worker (SPEC §4 "Claim", docs/architecture.md
"Claim order" and "Long parses"):

    .venv/bin/python -m bench.fairness backlog [--files 300] [--concurrency 4]
    .venv/bin/python -m bench.fairness scans [--pages 8] [--small 4] [--concurrency 2]

``backlog``: a 300-file upload to knowledge base A (one key), then, while it is being processed, one
file to knowledge base B and one by another key to A. Reported: how many of A's backlog became
READY between each late upload and its READY (the delay in jobs; before fair claims it was the rest
of the backlog), and the seconds. The embedder's vectors cost nothing here (bench.queue_cost's
``FreeVectors``): the order is what is measured, every other step is real.

``scans``: two scanned PDFs (image-only pages read by OCR, in the isolated parse child) uploaded
first, then small text files; one worker with two slots and the real local model. Run twice on
fresh databases, with the long-parse lane (the default) and without it
(``ULTIMATE_RAG_LONG_PARSE_SECONDS=0``): the seconds from each small file's upload to its READY.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID, uuid4

from ultimate_rag.adapter_factories import make_embedder
from ultimate_rag.bootstrap import Container, build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings

from .common import fresh_database, machine
from .parse_ocr import scanned_pdf
from .queue_cost import FreeVectors

TEXT = ("Quarterly report of depot {n}: forty crates of rope, twelve signal flares and two foghorn membranes "
        "arrived on Tuesday; the ferry schedule changes in spring.")


async def upload(container: Container, kb: UUID, name: str, data: bytes, mime: str, key: str) -> UUID:
    """What the API's upload does after its checks: the bytes stored, then document and job in one statement."""
    doc = uuid4()
    ext = name.rsplit(".", 1)[-1]
    object_key = f"{kb}/{doc}/source.{ext}"
    await container.infra.storage.put(object_key, data, mime)
    await container.ingest.documents.create_with_job(
        document_id=doc, knowledge_base_id=kb, filename=name, mime_type=mime, size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(), object_key=object_key, max_attempts=3, uploaded_by=key)
    return doc


async def status(container: Container, doc: UUID) -> str:
    row = await container.infra.db.fetchone("SELECT status FROM documents WHERE id = %s", (doc,))
    return str(row["status"]) if row else "GONE"


async def ready_count(container: Container, kb: UUID) -> int:
    row = await container.infra.db.fetchone(
        "SELECT count(*) AS n FROM documents WHERE knowledge_base_id = %s AND status = 'READY'", (kb,))
    return int(row["n"]) if row else 0


async def poll(check: Callable[[], Awaitable[bool]], every: float = 0.05) -> None:
    while True:
        if await check():
            return
        await asyncio.sleep(every)


async def until_ready(container: Container, doc: UUID) -> None:
    while (current := await status(container, doc)) != "READY":
        if current == "FAILED":
            raise SystemExit(f"document {doc} FAILED")
        await asyncio.sleep(0.05)


async def _at_least(container: Container, kb: UUID, n: int) -> bool:
    return await ready_count(container, kb) >= n


async def _all_parsing(container: Container, docs: list[UUID]) -> bool:
    return [await status(container, d) for d in docs] == ["PARSING"] * len(docs)


@asynccontextmanager
async def fresh_container(*, free_vectors: bool, **settings: Any) -> AsyncIterator[Container]:
    """The product's container on a new migrated database (removed afterwards)."""
    url, server, root = fresh_database()
    s = Settings(database_url=url, data_dir=root / "data", admin_key="bench-admin-key", **settings)
    container = build(s, url=url, embedder=FreeVectors(make_embedder(s)) if free_vectors else None)
    try:
        await container.open()
        container.embedding.embedder.count_tokens("warm up")
        yield container
    finally:
        await container.close()
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)


async def backlog(args: argparse.Namespace) -> None:
    async with fresh_container(free_vectors=True) as container:
        a = (await container.ingest.knowledge_bases.create("backlog", "", KnowledgeBaseSettings())).id
        b = (await container.ingest.knowledge_bases.create("one file", "", KnowledgeBaseSettings())).id
        for n in range(args.files):
            await upload(container, a, f"a{n}.txt", TEXT.format(n=n).encode(), "text/plain", "urk_bulk")
        stop = asyncio.Event()
        worker = container.worker(WorkerConfig(concurrency=args.concurrency, poll_interval_seconds=0.2))
        loop = asyncio.create_task(worker.run(stop))
        start = time.perf_counter()
        await poll(lambda: _at_least(container, a, 10))
        late: dict[str, tuple[UUID, UUID]] = {}
        before = await ready_count(container, a)
        uploaded = time.perf_counter()
        late["another knowledge base"] = (b, await upload(container, b, "b.txt", TEXT.format(n="B").encode(),
                                                          "text/plain", "urk_bulk"))
        late["another key, same knowledge base"] = (a, await upload(container, a, "mine.txt",
                                                                    TEXT.format(n="mine").encode(), "text/plain",
                                                                    "urk_other"))
        results = []
        for what, (_, doc) in late.items():
            await until_ready(container, doc)
            results.append((what, await ready_count(container, a) - before, time.perf_counter() - uploaded))
        await poll(lambda: _at_least(container, a, args.files + 1))
        total = time.perf_counter() - start
        stop.set()
        await loop
    print(machine())
    per_doc = total / (args.files + 2)
    print(f"RESULT fairness backlog: {args.files} files in A by one key, worker concurrency {args.concurrency}, "
          f"{per_doc * 1000:.0f} ms a document through the pipeline (vectors free)")
    for what, jobs, seconds in results:
        print(f"RESULT fairness backlog: {what}: READY {seconds:.2f} s after its upload, {jobs} of the backlog's "
              f"documents became READY meanwhile (in FIFO order it waited for the {args.files - before} left)")


async def scans_run(args: argparse.Namespace, lane: bool) -> tuple[list[float], float]:
    async with fresh_container(free_vectors=False, long_parse_seconds=5.0 if lane else 0.0,
                               worker_concurrency=args.concurrency) as container:
        kb = (await container.ingest.knowledge_bases.create("scans", "", KnowledgeBaseSettings())).id
        stop = asyncio.Event()
        worker = container.worker(WorkerConfig(concurrency=args.concurrency, poll_interval_seconds=0.2))
        loop = asyncio.create_task(worker.run(stop))
        books = [await upload(container, kb, f"book{i}.pdf", scanned_pdf(args.pages + i), "application/pdf",
                              "urk_bench") for i in range(2)]  # two different books: no duplicate of the other
        await poll(lambda: _all_parsing(container, books))
        small_at = time.perf_counter()
        small = [await upload(container, kb, f"note{n}.txt", (TEXT.format(n=n) + "\n\n") .encode() * 3,
                              "text/plain", "urk_bench") for n in range(args.small)]
        waits = []
        for doc in small:
            await until_ready(container, doc)
            waits.append(time.perf_counter() - small_at)
        for doc in books:
            await until_ready(container, doc)
        books_done = time.perf_counter() - small_at
        stop.set()
        await loop
    return waits, books_done


async def scans(args: argparse.Namespace) -> None:
    print(machine())
    for lane in (True, False):
        waits, books = await scans_run(args, lane)
        print(f"RESULT fairness scans: {'with' if lane else 'without'} the long-parse lane: {args.small} small files "
              f"uploaded behind two scans ({args.pages} and {args.pages + 1} pages) (worker concurrency {args.concurrency}) READY after "
              f"{min(waits):.1f}-{max(waits):.1f} s; both scans READY after {books:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("backlog")
    one.add_argument("--files", type=int, default=300)
    one.add_argument("--concurrency", type=int, default=4)
    two = sub.add_parser("scans")
    two.add_argument("--pages", type=int, default=8)
    two.add_argument("--small", type=int, default=4)
    two.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(backlog(args) if args.what == "backlog" else scans(args))


if __name__ == "__main__":
    main()

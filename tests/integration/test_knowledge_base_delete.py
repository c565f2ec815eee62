"""Deleting a knowledge base while its documents are mid-pipeline leaves no trace once done."""

from __future__ import annotations

import asyncio

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually

from .helpers import use_embedder
from .test_api import make_kb, upload
from .test_lifecycle import SlowEmbedder, ready_doc, wait_status


async def test_delete_a_knowledge_base_mid_pipeline_leaves_nothing(client, container, embedder, settings) -> None:
    kb = await make_kb(client, "doomed")
    other = await make_kb(client, "kept")
    kept_doc = await ready_doc(client, container, other, "k.md", "# Kept\n\nThis knowledge base stays.\n")
    ready = await ready_doc(client, container, kb, "r.md", "# Ready\n\nAlready indexed text about tea.\n")
    use_embedder(container, SlowEmbedder(embedder, delay=0.2), batch_size=1)
    text = "\n\n".join(f"## Part {i}\n\nParagraph {i} about ferries and harbours." for i in range(10))
    busy = (await upload(client, kb, "busy.md", text.encode())).json()["id"]
    queued = [(await upload(client, kb, f"q{i}.txt", f"queued {i}".encode())).json()["id"] for i in range(3)]

    worker = container.worker(WorkerConfig(heartbeat_seconds=0.1, concurrency=1, poll_interval_seconds=0.1))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    await wait_status(container, busy, "EMBEDDING")

    r = await client.delete(f"/api/knowledge-bases/{kb}")
    assert r.status_code == 202 and r.json()["deleting"] is True
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "tea"})
    assert r.status_code == 200 and r.json()["results"] == []
    r = await upload(client, kb, "late.txt", b"too late")
    assert r.status_code == 409 and "being deleted" in r.json()["detail"]

    async def status() -> int:
        return (await client.get(f"/api/knowledge-bases/{kb}")).status_code

    try:
        await eventually(status, lambda code: code == 404, timeout=300)  # every document goes through a worker
    finally:
        stop.set()
    await running
    assert (await client.get(f"/api/knowledge-bases/{kb}")).status_code == 404
    for doc in [ready, busy, *queued]:
        assert (await client.get(f"/api/documents/{doc}")).status_code == 404
    for table in ("documents", "chunks", "document_assets", "chunk_vectors_384"):
        row = await container.infra.db.fetchone(f"SELECT count(*) AS n FROM {table} WHERE knowledge_base_id = %s", (kb,))
        assert row["n"] == 0, table
    assert not (settings.objects_dir / kb).exists()
    assert not (settings.snapshots_dir / kb).exists()
    # the other knowledge base is untouched
    assert (await client.get(f"/api/documents/{kept_doc}")).json()["status"] == "READY"
    r = await client.post(f"/api/knowledge-bases/{other}/search", json={"query": "knowledge base stays"})
    assert r.json()["results"][0]["document_id"] == kept_doc


async def test_an_empty_knowledge_base_disappears_at_once(client) -> None:
    kb = await make_kb(client, "empty")
    r = await client.delete(f"/api/knowledge-bases/{kb}")
    assert r.status_code == 202
    assert (await client.get(f"/api/knowledge-bases/{kb}")).status_code == 404
    assert (await client.delete(f"/api/knowledge-bases/{kb}")).status_code == 404

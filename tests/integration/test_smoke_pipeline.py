"""Upload -> worker -> READY -> search, through the real API, database, files and model."""

from __future__ import annotations

from ultimate_rag.services.job_loop import WorkerConfig


async def make_kb(client, name="kb"):
    r = await client.post("/api/knowledge-bases", json={"name": name})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_upload_process_search(client, container) -> None:
    kb = await make_kb(client)
    md = "# Cooking\n\nThe sourdough starter needs feeding every day.\n\n## Soup\n\n辣味面汤很受欢迎。\n"
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("notes.md", md.encode())})
    assert r.status_code == 202, r.text
    doc = r.json()
    assert doc["status"] == "PENDING"
    worker = container.worker(WorkerConfig(heartbeat_seconds=5))
    assert await worker.run_until_idle() == 1
    r = await client.get(f"/api/documents/{doc['id']}")
    body = r.json()
    assert body["status"] == "READY", body
    assert body["chunk_count"] >= 1
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "spicy noodle soup", "top_k": 3})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results and results[0]["document_id"] == doc["id"]

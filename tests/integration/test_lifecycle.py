"""Document lifecycle through the API (SPEC §4, §6): delete, re-upload, fail, recover, bulk reindex,
the 409 rule under concurrency, and every refused transition changing nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.lifecycle import BulkReindexFilter
from ultimate_rag.testing.eventually import eventually

from .helpers import use_embedder
from .test_api import PNG, make_kb, upload


async def run_worker(container) -> None:
    await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle()


async def ready_doc(client: httpx.AsyncClient, container, kb: str, name: str = "a.md",
                    text: str = "# Tea\n\nGreen tea is steamed, black tea is oxidised.\n") -> str:
    doc = (await upload(client, kb, name, text.encode())).json()["id"]
    await run_worker(container)
    assert (await client.get(f"/api/documents/{doc}")).json()["status"] == "READY"
    return doc


async def state(container, doc: str) -> dict:
    return await container.infra.db.fetchone(
        "SELECT d.status, d.error_message, d.object_key, d.content_revision, d.chunk_count, d.updated_at,"
        " j.status AS job_status, j.operation, j.force, j.attempts FROM documents d"
        " JOIN ingestion_jobs j ON j.document_id = d.id WHERE d.id = %s", (doc,))


async def search(client: httpx.AsyncClient, kb: str, query: str) -> list[dict]:
    return (await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": query})).json()["results"]


async def test_soft_delete_hides_at_once_then_reindex_restores_the_same_chunks(client, container, settings) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    chunk_ids = [c["id"] for c in (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]]
    r = await client.delete(f"/api/documents/{doc}")
    assert r.status_code == 202 and r.json()["status"] == "PENDING"
    assert await search(client, kb, "green tea") == []  # from the moment the delete is accepted
    s = await state(container, doc)
    assert (s["operation"], s["force"], s["job_status"]) == ("delete", False, "PENDING")
    await run_worker(container)

    body = (await client.get(f"/api/documents/{doc}")).json()
    assert body["status"] == "DELETED" and body["deleted_at"] and body["chunk_count"] == 0
    assert (await client.get(f"/api/documents/{doc}/chunks")).json()["items"] == []
    assert await container.embedding.default_index.count_by_document(doc) == 0
    assert not (settings.snapshots_dir / kb / doc).exists()
    assert (await client.get(f"/api/documents/{doc}/source")).status_code == 200  # the source is kept
    assert (await client.delete(f"/api/documents/{doc}")).status_code == 409  # already deleted

    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
    await run_worker(container)
    body = (await client.get(f"/api/documents/{doc}")).json()
    assert body["status"] == "READY" and body["deleted_at"] is None
    assert [c["id"] for c in (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]] == chunk_ids
    assert (await search(client, kb, "green tea"))[0]["document_id"] == doc


async def test_hard_delete_leaves_nothing_anywhere(client, container, settings) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    keep = await ready_doc(client, container, kb, "b.md", "# Coffee\n\nEspresso is pressed.\n")
    assert (await client.delete(f"/api/documents/{doc}", params={"force": "true"})).status_code == 202
    await run_worker(container)
    assert (await client.get(f"/api/documents/{doc}")).status_code == 404
    for table, column in (("documents", "id"), ("ingestion_jobs", "document_id"), ("chunks", "document_id"),
                          ("document_assets", "document_id"), ("chunk_vectors_384", "document_id")):
        row = await container.infra.db.fetchone(f"SELECT count(*) AS n FROM {table} WHERE {column} = %s", (doc,))
        assert row["n"] == 0, table
    assert not (settings.objects_dir / kb / doc).exists()
    assert not (settings.snapshots_dir / kb / doc).exists()
    # the other document is untouched
    assert (await client.get(f"/api/documents/{keep}")).json()["status"] == "READY"
    assert (await search(client, kb, "espresso"))[0]["document_id"] == keep


async def test_a_soft_deleted_document_can_then_be_hard_deleted(client, container, settings) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    await client.delete(f"/api/documents/{doc}")
    await run_worker(container)
    assert (await client.delete(f"/api/documents/{doc}", params={"force": "true"})).status_code == 202
    await run_worker(container)
    assert (await client.get(f"/api/documents/{doc}")).status_code == 404
    assert not (settings.objects_dir / kb / doc).exists()


async def test_re_upload_replaces_the_content_and_then_the_old_source(client, container, settings) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb, "menu.md", "# Menu\n\nSpicy noodle soup with dumplings.\n")
    old_key = (await state(container, doc))["object_key"]
    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("menu-v2.md", b"# Menu\n\nLemon cake.\n")})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "PENDING" and r.json()["content_revision"] == 2
    s = await state(container, doc)
    assert s["object_key"] != old_key and s["operation"] == "ingest"
    assert not (settings.objects_dir / old_key).exists()
    assert (settings.objects_dir / s["object_key"]).exists()
    await run_worker(container)
    body = (await client.get(f"/api/documents/{doc}")).json()
    assert body["status"] == "READY" and body["filename"] == "menu-v2.md"
    contents = [c["content"] for c in (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]]
    assert contents == ["Menu\n\nLemon cake."]  # the heading leads its section's first chunk
    assert (await client.get(f"/api/documents/{doc}/source")).content == b"# Menu\n\nLemon cake.\n"
    assert await container.embedding.default_index.count_by_document(doc) == 1


async def test_re_upload_is_validated_before_anything_changes(client, container) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    before = await state(container, doc)
    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("x.txt", PNG)})
    assert r.status_code == 415
    r = await client.put(f"/api/documents/{doc}/content",
                         files={"file": ("x.txt", b"a" * (container.settings.max_upload_bytes + 1))})
    assert r.status_code == 413
    assert await state(container, doc) == before


async def test_fail_cancels_a_queued_document_and_refuses_stable_ones(client, container) -> None:
    kb = await make_kb(client)
    doc = (await upload(client, kb, "a.txt", b"queued")).json()["id"]
    r = await client.post(f"/api/documents/{doc}/fail")
    assert r.status_code == 200
    assert (r.json()["status"], r.json()["error_message"], r.json()["job_status"]) == (
        "FAILED", "cancelled by operator", "FAILED")
    r = await client.post(f"/api/documents/{doc}/fail")
    assert r.status_code == 409 and "nothing to cancel" in r.json()["detail"]
    await run_worker(container)  # nothing is claimed
    assert (await state(container, doc))["status"] == "FAILED"


class SlowEmbedder:
    """The real model, slowed down so a test can act while a document is EMBEDDING."""

    def __init__(self, real, delay: float) -> None:
        self.real, self.delay = real, delay
        self.name, self.dimension, self.max_tokens = real.name, real.dimension, real.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.delay)  # the scenario: a slow embedder keeps the document EMBEDDING
        return await self.real.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.real.embed_query(text)


async def wait_status(container, doc: str, status: str, timeout: float = 60) -> None:
    await eventually(lambda: state(container, doc), lambda row: row["status"] == status, timeout, what=f"{doc} {status}")


@pytest.mark.parametrize("operation", ["fail", "recover"])
async def test_fail_or_recover_during_embedding_stops_the_worker_for_good(client, container, embedder,
                                                                          operation) -> None:
    use_embedder(container, SlowEmbedder(embedder, delay=0.3), batch_size=1)
    kb = await make_kb(client)
    text = "\n\n".join(f"## Part {i}\n\nThe ferry number {i} leaves the harbour at dawn." for i in range(12))
    doc = (await upload(client, kb, "ferries.md", text.encode())).json()["id"]
    worker = container.worker(WorkerConfig(heartbeat_seconds=0.1, concurrency=1, shutdown_grace_seconds=0))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    await wait_status(container, doc, "EMBEDDING")
    old_run = set(worker._tasks)
    r = await client.post(f"/api/documents/{doc}/{operation}")
    assert r.status_code == (200 if operation == "fail" else 202), r.text
    if operation == "recover":
        # queued again; this worker stops (whether or not it already claimed the fresh job, which a
        # stopping worker hands back): the recovered job waits for the next one
        stop.set()
    # the old run notices on its next heartbeat that its lease is gone and ends without a write
    await eventually(lambda: not old_run & set(worker._tasks), what="the old run ended")
    stop.set()
    await running
    final = await state(container, doc)
    if operation == "fail":
        assert (final["status"], final["job_status"], final["error_message"]) == (
            "FAILED", "FAILED", "cancelled by operator")
        assert await container.embedding.default_index.count_by_document(doc) == 0 and final["chunk_count"] == 0
    else:
        assert final["status"] == "PENDING" and final["attempts"] == 0
        use_embedder(container, embedder)
        await run_worker(container)
        assert (await state(container, doc))["status"] == "READY"


async def test_recover_is_only_for_running_documents(client, container) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    r = await client.post(f"/api/documents/{doc}/recover")
    assert r.status_code == 409 and "only a running document" in r.json()["detail"]


@pytest.mark.parametrize("operation", ["reindex", "delete", "reupload"])
async def test_of_fifty_concurrent_calls_exactly_one_wins(client, container, operation) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)

    async def call() -> httpx.Response:
        if operation == "reindex":
            return await client.post(f"/api/documents/{doc}/reindex")
        if operation == "delete":
            return await client.delete(f"/api/documents/{doc}")
        return await client.put(f"/api/documents/{doc}/content", files={"file": ("n.md", b"# New\n\nnew text\n")})

    responses = await asyncio.gather(*(call() for _ in range(50)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [202] + [409] * 49, codes
    losers = "already queued for deletion" if operation == "delete" else "try again later"
    assert all(losers in r.json()["detail"] for r in responses if r.status_code == 409)
    if operation == "reupload":
        assert (await state(container, doc))["content_revision"] == 2
    await run_worker(container)
    assert (await state(container, doc))["status"] == ("DELETED" if operation == "delete" else "READY")


async def test_bulk_reindex_counts_and_filters(client, container) -> None:
    kb = await make_kb(client)
    ready = [await ready_doc(client, container, kb, f"d{i}.md", f"# Doc {i}\n\nbody {i}\n") for i in range(3)]
    queued = (await upload(client, kb, "q.txt", b"still queued")).json()["id"]
    await container.infra.db.execute("UPDATE documents SET status = 'FAILED' WHERE id = %s", (ready[0],))
    await container.infra.db.execute("UPDATE documents SET parser_version = '0.1.0' WHERE id = %s", (ready[1],))

    r = await client.post(f"/api/knowledge-bases/{kb}/reindex", json={"filter": "failed"})
    assert r.status_code == 202 and r.json() == {"queued": 1, "skipped_active": 1}
    await run_worker(container)
    r = await client.post(f"/api/knowledge-bases/{kb}/reindex", json={"filter": "outdated_parser"})
    assert r.json() == {"queued": 1, "skipped_active": 0}
    assert (await state(container, ready[1]))["status"] == "PENDING"
    await run_worker(container)
    r = await client.post(f"/api/knowledge-bases/{kb}/reindex")
    assert r.json() == {"queued": 4, "skipped_active": 0}
    await run_worker(container)
    counts = (await client.get(f"/api/knowledge-bases/{kb}/documents")).json()["counts"]
    assert counts == {"READY": 4}
    assert queued
    assert (await client.post(f"/api/knowledge-bases/{kb}/reindex", json={"filter": "nope"})).status_code == 422


async def test_bulk_reindex_works_in_batches(container) -> None:
    from .helpers import new_kb

    kb = await new_kb(container)
    await container.infra.db.execute(
        "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key, status)"
        " SELECT gen_random_uuid(), %s, 'f', 'text/plain', 1, 'x', 'k',"
        " CASE WHEN g %% 10 = 0 THEN 'PARSING' ELSE 'READY' END FROM generate_series(1, 2500) g", (kb,))
    await container.infra.db.execute(
        "INSERT INTO ingestion_jobs (id, document_id, status, attempts, max_attempts)"
        " SELECT gen_random_uuid(), id, 'SUCCEEDED', 1, 3 FROM documents")
    queued, skipped = await container.ingest.lifecycle.bulk_reindex(kb, BulkReindexFilter.ALL, batch_size=300)
    assert (queued, skipped) == (2250, 250)


# Every status x every operation: the expected answer, and a refused call changes nothing.
OPERATIONS = ["reindex", "delete", "delete_hard", "fail", "recover", "reupload"]
EXPECTED = {
    "READY": [202, 202, 202, 409, 409, 202], "FAILED": [202, 202, 202, 409, 409, 202],
    "OUTDATED": [202, 202, 202, 409, 409, 202], "DELETED": [202, 409, 202, 409, 409, 202],
    "PENDING": [409, 202, 202, 200, 409, 409], "UPLOADING": [409, 409, 409, 200, 409, 409],
    "FETCHING": [409, 409, 409, 409, 409, 409], "DELETING": [409, 409, 409, 200, 409, 409],
    **{s: [409, 409, 409, 200, 202, 409] for s in ("PARSING", "CHUNKING", "EMBEDDING", "INDEXING")},
}


@pytest.mark.parametrize("status", sorted(EXPECTED))
async def test_every_operation_in_every_status(client, container, status) -> None:
    kb = await make_kb(client)
    for operation, expected in zip(OPERATIONS, EXPECTED[status], strict=True):
        doc = (await upload(client, kb, "a.md", b"# A\n\ntext\n")).json()["id"]
        await container.infra.db.execute("UPDATE documents SET status = %s WHERE id = %s", (status, doc))
        before = await state(container, doc)
        if operation == "reindex":
            r = await client.post(f"/api/documents/{doc}/reindex")
        elif operation.startswith("delete"):
            r = await client.delete(f"/api/documents/{doc}", params={"force": str(operation == "delete_hard").lower()})
        elif operation == "reupload":
            r = await client.put(f"/api/documents/{doc}/content", files={"file": ("b.md", b"# B\n\nother\n")})
        else:
            r = await client.post(f"/api/documents/{doc}/{operation}")
        assert r.status_code == expected, (status, operation, r.status_code, r.text)
        if r.status_code == 409:
            assert r.json()["detail"]
            assert await state(container, doc) == before, (status, operation)

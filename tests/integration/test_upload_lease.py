"""A re-upload holds its document in UPLOADING under a lease. A commit that fails in the API puts
the document back at once (compensation); an API killed between UPLOADING and queuing leaves the
lease to expire, and a worker's claim puts the document back where it was, with its previous
revision — no 409 forever, no document gone from search."""

from __future__ import annotations

import httpx
import psycopg
import pytest

from ultimate_rag.adapters.postgres.errors import translated
from ultimate_rag.api.app import create_app
from ultimate_rag.domain.errors import ConflictError, TransientError

from .test_lifecycle import ready_doc, run_worker, search, state

ADMIN = {"Authorization": "Bearer test-admin-key-0123456789"}


class FailingPut:
    """The real storage whose writes fail (fault injection: object storage down mid-upload)."""

    def __init__(self, real) -> None:
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    async def put(self, key: str, data: bytes, mime_type: str) -> None:
        raise TransientError("S3 could not put: SlowDown at s3.internal", service="object storage", code="HTTP 503")


async def lenient_client(container) -> httpx.AsyncClient:
    """The API over ASGI, answering 500s instead of raising them into the test."""
    transport = httpx.ASGITransport(app=create_app(container=container), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test", headers=ADMIN)


async def keys_of(container, kb: str, doc: str) -> list[str]:
    return sorted([k async for k, _ in container.infra.storage.list_keys(f"{kb}/{doc}/")])


@pytest.mark.parametrize("failure", ["storage", "commit"])
async def test_a_reupload_whose_commit_fails_restores_the_document_at_once(client, container, failure) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "menus"})).json()["id"]
    doc = await ready_doc(client, container, kb, "menu.md", "# Menu\n\nApple pie with cinnamon.\n")
    before = await state(container, doc)
    objects = await keys_of(container, kb, doc)
    if failure == "storage":
        container.ingest.lifecycle._storage = FailingPut(container.infra.storage)
    else:
        async def commit_fails(*args, **kwargs):  # the database lost, as the postgres adapters report it
            raise translated(psycopg.OperationalError("connection to server at \"db.internal\" (10.0.3.7) lost"))
        container.ingest.lifecycle.finish_upload = commit_fails

    async with await lenient_client(container) as api:
        r = await api.put(f"/api/documents/{doc}/content", files={"file": ("menu.md", b"# Menu\n\nPlum tart.\n")})
    # the backend is unavailable for now: 503 with a reason, never its hosts or addresses
    assert r.status_code == 503 and r.headers["retry-after"], r.text
    assert not any(raw in r.text for raw in ("internal", "10.0.3.7", "SlowDown")), r.text
    after = await state(container, doc)
    assert (after["status"], after["error_message"], after["object_key"], after["content_revision"]) == (
        "READY", None, before["object_key"], before["content_revision"])
    assert await keys_of(container, kb, doc) == objects  # the new bytes were removed
    assert [h["document_id"] for h in await search(client, kb, "apple pie")] == [doc]
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202


async def test_a_failed_document_keeps_its_reason_when_a_reupload_is_undone(client, container) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "empty"})).json()["id"]
    doc = (await client.post(f"/api/knowledge-bases/{kb}/documents",
                             files={"file": ("e.txt", b"   \n\n", "text/plain")})).json()["id"]
    await run_worker(container)
    reason = (await state(container, doc))["error_message"]
    assert (await state(container, doc))["status"] == "FAILED" and reason
    container.ingest.lifecycle._storage = FailingPut(container.infra.storage)
    with pytest.raises(TransientError):
        await container.ingest.lifecycle.replace_content(doc, "e.txt", "text/plain", b"now with text")
    assert ((await state(container, doc))["status"], (await state(container, doc))["error_message"]) == (
        "FAILED", reason)


async def test_an_upload_left_by_a_killed_api_is_converged_by_the_workers(client, container) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "teas"})).json()["id"]
    doc = await ready_doc(client, container, kb)
    before = await state(container, doc)
    # the API marked the document UPLOADING, then died before storing or committing anything
    _, token = await container.ingest.lifecycle.begin_upload(doc)
    assert (await state(container, doc))["status"] == "UPLOADING"
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 409
    await run_worker(container)  # the lease has not expired: nothing moves
    assert (await state(container, doc))["status"] == "UPLOADING"
    # a janitor pass meanwhile keeps the previous revision's vectors
    await container.maintenance.janitor.with_grace(0).sweep()

    await container.infra.db.execute("UPDATE documents SET upload_expires_at = now() - interval '1 second'"
                               " WHERE id = %s", (doc,))  # as the lease leaves it once the deadline passed
    await run_worker(container)  # any worker's claim converges it: no manual step
    after = await state(container, doc)
    assert (after["status"], after["object_key"], after["content_revision"], after["error_message"]) == (
        "READY", before["object_key"], before["content_revision"], None)
    assert [h["document_id"] for h in await search(client, kb, "green tea")] == [doc]
    with pytest.raises(ConflictError):  # the dead API's late commit cannot land on the restored document
        await container.ingest.lifecycle.finish_upload(doc, token, object_key="x", filename="x", mime_type="text/plain",
                                                size_bytes=1, sha256="0", revision=before["content_revision"] + 1)

    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("a.md", b"# Tea\n\nOolong is rolled.\n")})
    assert r.status_code == 202
    await run_worker(container)
    assert (await state(container, doc))["status"] == "READY"
    assert [h["document_id"] for h in await search(client, kb, "oolong")] == [doc]


async def test_an_expired_upload_of_a_deleted_document_stays_deleted(client, container) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "bin"})).json()["id"]
    doc = await ready_doc(client, container, kb)
    (await client.delete(f"/api/documents/{doc}")).raise_for_status()
    await run_worker(container)
    assert (await state(container, doc))["status"] == "DELETED"
    await container.ingest.lifecycle.begin_upload(doc)
    await container.infra.db.execute("UPDATE documents SET upload_expires_at = now() - interval '1 second'"
                               " WHERE id = %s", (doc,))
    await run_worker(container)
    assert (await state(container, doc))["status"] == "DELETED"
    assert await search(client, kb, "green tea") == []

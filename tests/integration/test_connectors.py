"""Connectors against real HTTP servers on 127.0.0.1 (pages with ETag and Last-Modified, a
sitemap, redirects, a 404, an oversize page), a temp directory, and the real queue and pipeline:
first sync, unchanged resync (nothing reprocessed), changed item, removed item, abort mid-sync,
scheduled syncs, one worker per sync, lease expiry, and SSRF through a redirect."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain.auth import Role
from ultimate_rag.domain.errors import TransientError
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually

from ..conftest import ADMIN_KEY
from .helpers import new_kb

MAX_ITEM = 20_000


@dataclass
class Page:
    body: bytes
    content_type: str = "text/markdown; charset=utf-8"
    status: int = 200
    location: str | None = None
    version: int = 1
    hold: threading.Event | None = None  # answer only once this is set


@dataclass
class Site:
    """A small web site whose pages the tests change; it answers conditional requests."""

    pages: dict[str, Page] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    conditional: Counter[str] = field(default_factory=Counter)
    not_modified: Counter[str] = field(default_factory=Counter)
    url: str = ""

    def put(self, path: str, body: bytes | str, **kw: object) -> str:
        old = self.pages.get(path)
        data = body.encode() if isinstance(body, str) else body
        self.pages[path] = Page(data, version=(old.version + 1) if old else 1, **kw)  # type: ignore[arg-type]  # Page fields by name
        return self.url + path

    def etag(self, path: str) -> str:
        page = self.pages[path]
        return '"' + hashlib.sha256(page.body).hexdigest()[:16] + f'-{page.version}"'

    def last_modified(self, path: str) -> str:
        return formatdate(1_700_000_000 + self.pages[path].version * 1000, usegmt=True)


def serve(site: Site) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path
            site.hits[path] += 1
            page = site.pages.get(path)
            if page is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if page.hold is not None:
                page.hold.wait(30)
            if page.location:
                self.send_response(page.status)
                self.send_header("Location", page.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            etag, modified = site.etag(path), site.last_modified(path)
            if self.headers.get("If-None-Match") or self.headers.get("If-Modified-Since"):
                site.conditional[path] += 1
                if self.headers.get("If-None-Match") == etag or (
                        not self.headers.get("If-None-Match") and self.headers.get("If-Modified-Since") == modified):
                    site.not_modified[path] += 1
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
            self.send_response(page.status)
            self.send_header("Content-Type", page.content_type)
            self.send_header("Content-Length", str(len(page.body)))
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", modified)
            self.end_headers()
            self.wfile.write(page.body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    site.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    return httpd, site.url


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    httpd, _ = serve(s)
    yield s
    for page in s.pages.values():
        if page.hold is not None:
            page.hold.set()
    httpd.shutdown()


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    root.mkdir()
    return root


@pytest.fixture
def settings(db_url: str, tmp_path: Path, roots: Path) -> Settings:
    return Settings(
        database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
        retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=1_000_000,
        outbound_allow_networks="127.0.0.1/32", connector_max_item_bytes=MAX_ITEM,
        connector_fetch_timeout_seconds=10, connector_directory_roots=str(roots), connector_min_schedule_seconds=1,
        connector_sitemap_max_depth=1,
    )


async def sync_now(client: httpx.AsyncClient, container, kb: UUID, connector: str) -> dict:
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    assert r.status_code == 202, r.text
    await container.connectors.runner.run_until_idle("test-worker")
    got = await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")
    sync = got.json()["syncs"][0]
    assert sync["id"] == r.json()["id"]
    return sync


async def process(container) -> None:
    await container.worker(WorkerConfig(concurrency=1), worker_id="ingest").run_until_idle()


async def docs_by_item(container, kb: UUID) -> dict[str, dict]:
    rows = await container.infra.db.fetchall(
        "SELECT d.*, j.status AS job_status, j.attempts FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id"
        " WHERE d.knowledge_base_id = %s", (kb,))
    return {r["external_id"]: r for r in rows}


async def create(client: httpx.AsyncClient, kb: UUID, kind: str, config: dict, **extra: object) -> str:
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors", json={"kind": kind, "config": config, **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def counts(sync: dict, *names: str) -> tuple[int, ...]:
    return tuple(sync["counts"][n] for n in names)


async def test_urls_first_sync_unchanged_changed_removed_404_and_oversize(client, container, site) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# Alpha\n\nThe first page talks about alpine lakes.\n")
    b = site.put("/b", "<html><body><h1>Beta</h1><p>Bees make honey in summer.</p></body></html>",
                 content_type="text/html; charset=utf-8")
    missing = site.url + "/missing.md"
    big = site.put("/big.txt", "x" * (MAX_ITEM + 10), content_type="text/plain")
    connector = await create(client, kb, "urls", {"urls": [a, b, missing, big]})

    first = await sync_now(client, container, kb, connector)
    assert first["status"] == "SUCCEEDED", first
    assert counts(first, "discovered", "new", "updated", "unchanged", "removed", "failed") == (4, 2, 0, 0, 0, 2)
    errors = {e["external_id"]: e["error"] for e in first["errors"]}
    assert "404" in errors[missing] and "limit" in errors[big]
    docs = await docs_by_item(container, kb)
    assert {k: v["status"] for k, v in docs.items()} == {a: "PENDING", b: "PENDING", missing: "FAILED", big: "FAILED"}
    assert "404" in docs[missing]["error_message"] and "limit" in docs[big]["error_message"]
    assert docs[b]["filename"] == "b.html" and docs[b]["mime_type"].startswith("text/html")
    assert docs[a]["source"] == {"kind": "connector", "connector_id": connector, "external_id": a}
    assert await container.infra.storage.get(docs[a]["object_key"]) == site.pages["/a.md"].body
    await process(container)
    docs = await docs_by_item(container, kb)
    assert docs[a]["status"] == docs[b]["status"] == "READY"

    # unchanged: conditional requests, 304s, nothing queued or reprocessed
    second = await sync_now(client, container, kb, connector)
    assert counts(second, "discovered", "new", "updated", "unchanged", "removed", "failed") == (4, 0, 0, 2, 0, 2)
    assert site.not_modified["/a.md"] == 1 and site.not_modified["/b"] == 1
    again = await docs_by_item(container, kb)
    for item in (a, b):
        assert again[item]["status"] == "READY" and again[item]["attempts"] == 1
        assert again[item]["indexed_at"] == docs[item]["indexed_at"]
        assert again[item]["content_revision"] == 1

    # changed page -> re-upload path, new revision, old object removed after
    site.put("/a.md", "# Alpha\n\nThe page now talks about glaciers instead.\n")
    third = await sync_now(client, container, kb, connector)
    assert counts(third, "new", "updated", "unchanged") == (0, 1, 1)
    changed = (await docs_by_item(container, kb))[a]
    assert changed["status"] == "PENDING" and changed["content_revision"] == 2
    assert not await container.infra.storage.exists(docs[a]["object_key"])
    await process(container)
    chunks = await container.ingest.documents.chunks(changed["id"])
    assert any("glaciers" in c.content for c in chunks)

    # removed from the list -> soft-deleted through the delete job
    r = await client.patch(f"/api/knowledge-bases/{kb}/connectors/{connector}", json={"config": {"urls": [a]}})
    assert r.status_code == 200, r.text
    fourth = await sync_now(client, container, kb, connector)
    assert counts(fourth, "discovered", "unchanged", "removed") == (1, 1, 3)
    await process(container)
    final = await docs_by_item(container, kb)
    assert final[b]["status"] == "DELETED" and final[missing]["status"] == "DELETED" and final[a]["status"] == "READY"
    assert await container.infra.storage.exists(final[b]["object_key"])  # soft: the source stays

    # the item comes back unchanged -> restored by a reindex
    await client.patch(f"/api/knowledge-bases/{kb}/connectors/{connector}", json={"config": {"urls": [a, b]}})
    fifth = await sync_now(client, container, kb, connector)
    assert counts(fifth, "updated", "unchanged") == (1, 1)
    await process(container)
    assert (await docs_by_item(container, kb))[b]["status"] == "READY"


async def test_active_documents_are_left_alone_and_counted(client, container, site) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nalpha text\n")
    connector = await create(client, kb, "urls", {"urls": [a]})
    await sync_now(client, container, kb, connector)  # PENDING, not processed yet
    site.put("/a.md", "# A\n\nchanged text\n")
    sync = await sync_now(client, container, kb, connector)
    assert counts(sync, "skipped_active", "updated", "new") == (1, 0, 0)
    doc = (await docs_by_item(container, kb))[a]
    assert doc["status"] == "PENDING" and doc["content_revision"] == 1


async def test_unsupported_content_fails_the_item_before_storing(client, container, site) -> None:
    kb = await new_kb(container)
    # an executable: no parser reads it (images are a supported format since OCR)
    png = site.put("/tool", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4,
                   content_type="application/octet-stream")
    connector = await create(client, kb, "urls", {"urls": [png]})
    sync = await sync_now(client, container, kb, connector)
    assert counts(sync, "new", "failed") == (0, 1)
    doc = (await docs_by_item(container, kb))[png]
    assert doc["status"] == "FAILED" and "unsupported" in doc["error_message"] and doc["object_key"] == ""
    assert [k async for k, _ in container.infra.storage.list_keys("")] == []


async def test_ssrf_through_a_redirect_is_refused(client, container, site) -> None:
    kb = await new_kb(container)
    to_metadata = site.put("/r1", b"", status=302, location="http://169.254.169.254/latest/meta-data")
    to_private = site.put("/r2", b"", status=302, location="http://10.1.2.3/secret")
    connector = await create(client, kb, "urls", {"urls": [to_metadata, to_private, "http://192.168.1.1/x.md"]})
    sync = await sync_now(client, container, kb, connector)
    assert counts(sync, "new", "failed") == (0, 3)
    docs = await docs_by_item(container, kb)
    assert "169.254.169.254" in docs[to_metadata]["error_message"]
    assert "10.1.2.3" in docs[to_private]["error_message"]
    assert all("refusing" in d["error_message"] for d in docs.values())
    bad: dict[str, Any]
    for bad in ({"urls": ["file:///etc/passwd"]}, {"urls": ["gopher://x/"]}, {"urls": []}, {"url": "x"}):
        r = await client.post(f"/api/knowledge-bases/{kb}/connectors", json={"kind": "urls", "config": bad})
        assert r.status_code in (400, 422), r.text


async def test_sitemap_index_is_followed_within_bounds(client, container, site) -> None:
    kb = await new_kb(container)
    p1 = site.put("/p1.md", "# One\n\nfirst page\n")
    p2 = site.put("/p2.md", "# Two\n\nsecond page\n")
    deep = site.put("/deep.md", "# Deep\n\ntoo deep\n")
    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    site.put("/deeper.xml", f'<urlset {ns}><url><loc>{deep}</loc></url></urlset>', content_type="application/xml")
    site.put("/inner.xml", f'<sitemapindex {ns}><sitemap><loc>{site.url}/deeper.xml</loc></sitemap></sitemapindex>',
             content_type="application/xml")
    site.put("/pages.xml", f'<urlset {ns}><url><loc>{p1}</loc></url><url><loc>{p2}</loc></url></urlset>',
             content_type="application/xml")
    site.put("/sitemap.xml", f'<sitemapindex {ns}><sitemap><loc>{site.url}/pages.xml</loc></sitemap>'
             f'<sitemap><loc>{site.url}/inner.xml</loc></sitemap></sitemapindex>', content_type="application/xml")
    connector = await create(client, kb, "sitemap", {"url": f"{site.url}/sitemap.xml"})
    sync = await sync_now(client, container, kb, connector)
    assert sync["status"] == "SUCCEEDED" and counts(sync, "discovered", "new") == (2, 2)  # depth 1: deeper.xml unread
    assert set(await docs_by_item(container, kb)) == {p1, p2}
    # a sitemap that cannot be read fails the sync as a whole, and removes nothing
    del site.pages["/sitemap.xml"]
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    await container.connectors.runner.run_until_idle("w")
    failed = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}/syncs")).json()["items"][0]
    assert r.status_code == 202 and failed["status"] == "FAILED" and "404" in failed["error"]
    assert {d["status"] for d in (await docs_by_item(container, kb)).values()} == {"PENDING"}


async def test_directory_connector(client, container, roots: Path, tmp_path: Path) -> None:
    kb = await new_kb(container)
    folder = roots / "handbook"
    (folder / "sub").mkdir(parents=True)
    (folder / "intro.md").write_text("# Intro\n\nwelcome\n")
    (folder / "sub" / "faq.txt").write_text("questions and answers\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me\n")
    (folder / "escape.txt").symlink_to(secret)
    (folder / "big.txt").write_text("y" * (MAX_ITEM + 1))

    editor = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={kb: Role.EDITOR})
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors", headers={"Authorization": f"Bearer {editor}"},
                          json={"kind": "directory", "config": {"path": str(folder)}})
    assert r.status_code == 403
    for outside in (str(tmp_path), str(roots / ".." / "data"), "relative/path"):
        r = await client.post(f"/api/knowledge-bases/{kb}/connectors",
                              json={"kind": "directory", "config": {"path": outside}})
        assert r.status_code == 400, (outside, r.text)
    (roots / "link").symlink_to(tmp_path)
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors",
                          json={"kind": "directory", "config": {"path": str(roots / "link")}})
    assert r.status_code == 400

    connector = await create(client, kb, "directory", {"path": str(folder)})
    first = await sync_now(client, container, kb, connector)
    assert counts(first, "discovered", "new", "failed") == (3, 2, 1)  # the link out is never listed
    docs = await docs_by_item(container, kb)
    assert set(docs) == {"intro.md", "sub/faq.txt", "big.txt"} and docs["big.txt"]["status"] == "FAILED"
    # where each file lies in the folder: source.path, and metadata a filter can select a subfolder by
    assert docs["sub/faq.txt"]["source"]["path"] == "sub/faq.txt"
    assert docs["sub/faq.txt"]["metadata"] == {"source": {"path": "sub/faq.txt", "folder": "sub", "folders": ["sub"]}}
    await process(container)
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={
        "query": "questions", "filters": {"metadata": {"source.folders": {"$contains": "sub"}}}})
    assert [h["filename"] for h in r.json()["results"]] == ["faq.txt"]
    assert counts(await sync_now(client, container, kb, connector), "unchanged", "new", "updated") == (2, 0, 0)
    (folder / "intro.md").write_text("# Intro\n\nwelcome, changed\n")
    (folder / "sub" / "faq.txt").unlink()
    third = await sync_now(client, container, kb, connector)
    assert counts(third, "updated", "removed") == (1, 1)


async def test_abort_mid_sync_fails_the_documents_being_fetched(client, container, site) -> None:
    kb = await new_kb(container)
    fast = site.put("/fast.md", "# Fast\n\nquick\n")
    hold = threading.Event()
    slow = site.put("/slow.md", "# Slow\n\nslow\n", hold=hold)
    later = site.put("/later.md", "# Later\n\nnever reached\n")
    connector = await create(client, kb, "urls", {"urls": [fast, slow, later]})
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    assert r.status_code == 202
    assert (await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")).status_code == 409
    runner = container.connectors.runner
    lease = await runner.queue.claim("w1")
    assert lease is not None and await runner.queue.claim("w2") is None  # one worker per sync
    task = asyncio.create_task(runner.run_one(lease))

    async def fetching() -> bool:
        docs = await docs_by_item(container, kb)
        return slow in docs and docs[slow]["status"] == "FETCHING"

    await eventually(fetching)
    # FETCHING is aborted per connector, not per document
    doc_id = (await docs_by_item(container, kb))[slow]["id"]
    assert (await client.post(f"/api/documents/{doc_id}/fail")).status_code == 409
    aborted = await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/abort")
    assert aborted.status_code == 200 and aborted.json()["status"] == "ABORTED"
    docs = await docs_by_item(container, kb)
    assert docs[slow]["status"] == "FAILED" and docs[slow]["error_message"] == "connector sync aborted"
    assert docs[slow]["job_status"] == "FAILED"
    hold.set()
    await asyncio.wait_for(task, 20)
    docs = await docs_by_item(container, kb)
    assert later not in docs and docs[fast]["status"] == "PENDING" and docs[slow]["status"] == "FAILED"
    keys = [k async for k, _ in container.infra.storage.list_keys("")]
    assert keys == [docs[fast]["object_key"]]  # what the stopped worker stored was removed
    assert (await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/abort")).status_code == 409
    # the next sync picks the failed item up again
    again = await sync_now(client, container, kb, connector)
    assert again["status"] == "SUCCEEDED" and counts(again, "updated", "new") == (1, 1)


async def test_expired_lease_is_resumed_and_exhausted_one_fails_its_documents(client, container, site) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nalpha\n")
    b = site.put("/b.md", "# B\n\nbeta\n")
    connector = await create(client, kb, "urls", {"urls": [a, b]})
    await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    queue = container.connectors.queue
    lease = await queue.claim("dead-worker")
    assert lease is not None
    doc = await queue.start_new_item(lease, a, "a.md", 3)  # the dead worker got this far
    await container.infra.db.execute("UPDATE connector_syncs SET locked_at = now() - interval '1 hour'")
    await container.connectors.runner.run_until_idle("w2")  # reclaims and resumes
    sync = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).json()["syncs"][0]
    assert sync["status"] == "SUCCEEDED" and sync["attempts"] == 2 and counts(sync, "new") == (2,)
    docs = await docs_by_item(container, kb)
    assert docs[a]["id"] == doc and docs[a]["status"] == docs[b]["status"] == "PENDING"
    with pytest.raises(Exception, match="no longer owns"):
        await queue.record(lease, "new")  # the dead worker, back, is fenced out

    # a sync whose last attempt's worker dies ends FAILED, with its documents
    site.put("/c.md", "# C\n\ngamma\n")
    await client.patch(f"/api/knowledge-bases/{kb}/connectors/{connector}",
                       json={"config": {"urls": [a, b, site.url + "/c.md"]}})
    await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    lease = await queue.claim("dying")
    assert lease is not None
    await queue.start_new_item(lease, site.url + "/c.md", "c.md", 3)
    await container.infra.db.execute("UPDATE connector_syncs SET attempts = max_attempts,"
                               " locked_at = now() - interval '1 hour' WHERE status = 'RUNNING'")
    assert await queue.claim("other") is None
    ended = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).json()["syncs"][0]
    assert ended["status"] == "FAILED" and "lease expired" in ended["error"]
    c = (await docs_by_item(container, kb))[site.url + "/c.md"]
    assert c["status"] == "FAILED" and "lease expired" in c["error_message"]


async def test_scheduled_syncs_and_connector_crud(client, container, site) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nalpha\n")
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors",
                          json={"kind": "urls", "config": {"urls": [a]}, "schedule_seconds": 0})
    assert r.status_code == 422
    connector = await create(client, kb, "urls", {"urls": [a]}, schedule_seconds=1, name="pages")
    listed = (await client.get(f"/api/knowledge-bases/{kb}/connectors")).json()["items"]
    assert [c["id"] for c in listed] == [connector] and listed[0]["name"] == "pages"
    assert await container.connectors.runner.run_until_idle("w") == 1
    first = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).json()
    assert first["syncs"][0]["trigger"] == "schedule" and first["syncs"][0]["status"] == "SUCCEEDED"
    assert await container.connectors.runner.run_until_idle("w") == 0  # not due again yet
    # due again once its schedule (1 s) has passed
    assert await eventually(lambda: container.connectors.runner.run_until_idle("w"), lambda n: n > 0) == 1
    r = await client.patch(f"/api/knowledge-bases/{kb}/connectors/{connector}", json={"schedule_seconds": None})
    assert r.status_code == 200 and r.json()["schedule_seconds"] is None and r.json()["next_sync_at"] is None
    other = await new_kb(container)
    assert (await client.get(f"/api/knowledge-bases/{other}/connectors/{connector}")).status_code == 404
    assert (await client.delete(f"/api/knowledge-bases/{kb}/connectors/{connector}")).status_code == 204
    assert (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).status_code == 404
    doc = (await docs_by_item(container, kb))[a]
    assert doc["status"] == "PENDING" and doc["connector_id"] is None  # its documents stay


async def test_worker_loop_runs_requested_syncs(client, container, site) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nthe worker loop fetched this page\n")
    connector = await create(client, kb, "urls", {"urls": [a]})
    stop = asyncio.Event()
    worker = container.worker(WorkerConfig(concurrency=1, poll_interval_seconds=0.1, heartbeat_seconds=0.2))
    running = asyncio.create_task(worker.run(stop))
    await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    try:
        await eventually(lambda: docs_by_item(container, kb), lambda docs: docs.get(a, {}).get("status") == "READY")
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)


async def test_a_sync_stops_when_its_knowledge_base_is_being_deleted(client, container, site, roots) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nalpha\n")
    connector = await create(client, kb, "urls", {"urls": [a]})
    folder = roots / "docs"
    folder.mkdir()
    directory = await create(client, kb, "directory", {"path": str(folder)})
    await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    await container.infra.db.execute("UPDATE knowledge_bases SET deleting = true WHERE id = %s", (kb,))
    await container.connectors.runner.run_until_idle("w")
    sync = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).json()["syncs"][0]
    assert sync["status"] == "FAILED" and "being deleted" in sync["error"] and sync["attempts"] == 1
    assert await docs_by_item(container, kb) == {}
    assert (await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")).status_code == 409
    # a configuration that became invalid (its root was removed from the settings) fails at once
    await container.infra.db.execute("UPDATE knowledge_bases SET deleting = false WHERE id = %s", (kb,))
    await container.infra.db.execute("UPDATE connectors SET config = '{\"path\": \"/etc\"}' WHERE id = %s", (directory,))
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors/{directory}/sync")
    await container.connectors.runner.run_until_idle("w")
    sync = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{directory}")).json()["syncs"][0]
    assert r.status_code == 202 and sync["status"] == "FAILED" and "no longer valid" in sync["error"]


async def test_storing_new_bytes_fails_then_the_previous_content_is_kept(client, container, site, monkeypatch) -> None:
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nthe original text about rivers\n")
    connector = await create(client, kb, "urls", {"urls": [a]})
    await sync_now(client, container, kb, connector)
    await process(container)
    before = (await docs_by_item(container, kb))[a]
    site.put("/a.md", "# A\n\nnew text about mountains\n")
    storage = container.connectors.service._storage

    async def broken_put(key: str, data: bytes, content_type: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(storage, "put", broken_put)
    sync = await sync_now(client, container, kb, connector)
    monkeypatch.undo()
    assert counts(sync, "failed", "updated") == (1, 0) and "disk full" not in str(sync["errors"])
    assert sync["errors"][0]["error"] == "a storage or network operation failed (OSError)"  # the raw text: the log
    doc = (await docs_by_item(container, kb))[a]
    assert doc["status"] == "FAILED" and "previous content is kept" in doc["error_message"]
    assert doc["object_key"] == before["object_key"] and await container.infra.storage.exists(doc["object_key"])
    assert (await client.post(f"/api/documents/{doc['id']}/reindex")).status_code == 202
    await process(container)
    chunks = await container.ingest.documents.chunks(doc["id"])
    assert any("rivers" in c.content for c in chunks)
    # the next sync brings the new content in
    assert counts(await sync_now(client, container, kb, connector), "updated") == (1,)


async def test_an_item_failure_reads_as_its_reason_never_the_backends_raw_words(client, container, site,
                                                                                 monkeypatch) -> None:
    """docs/security.md: readers of a knowledge base see why a connector's document failed, never
    the hosts, buckets or users in an infrastructure error's own text (those go to the log)."""
    kb = await new_kb(container)
    a = site.put("/a.md", "# A\n\nabout rivers\n")
    connector = await create(client, kb, "urls", {"urls": [a]})

    async def unavailable(key: str, data: bytes, content_type: str) -> None:
        raise TransientError("PUT s3://acme-prod-docs/kb at s3.internal:9000 as rag_owner: 503",
                             service="object storage", code="HTTP 503")

    monkeypatch.setattr(container.connectors.service._storage, "put", unavailable)
    sync = await sync_now(client, container, kb, connector)
    doc = (await docs_by_item(container, kb))[a]
    assert doc["status"] == "FAILED" and doc["error_message"].startswith("the object storage failed (HTTP 503)")
    shown = str(sync) + doc["error_message"] + str((await client.get(f"/api/documents/{doc['id']}")).json())
    assert not any(raw in shown for raw in ("acme-prod-docs", "s3.internal", "rag_owner"))

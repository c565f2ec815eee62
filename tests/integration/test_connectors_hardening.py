"""Connector attacks through the HTTP API (real server objects, real PostgreSQL, a local web site):
hostile sitemaps (a gzip bomb, a DTD in UTF-16, more pages than allowed), credentials embedded in
connector URLs (never shown to readers or editors), fetch errors that would say what an internal host
name resolves to, and editors aborting admin-only connector syncs."""

from __future__ import annotations

import socket
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain.auth import Role
from ultimate_rag.settings import Settings

from ..conftest import ADMIN_KEY
from .helpers import new_kb
from .test_connectors import Site, create, docs_by_item, serve, sync_now


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    httpd, _ = serve(s)
    yield s
    httpd.shutdown()


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    root.mkdir()
    return root


@pytest.fixture
def settings(db_url: str, tmp_path: Path, roots: Path) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
                    retry_delay_seconds=0.05, poll_interval_seconds=0.2, outbound_allow_networks="127.0.0.1/32",
                    connector_fetch_timeout_seconds=10, connector_directory_roots=str(roots),
                    connector_max_item_bytes=256 * 1024 * 1024, connector_max_items=5)  # big uploads allowed


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_editors_cannot_abort_admin_only_connector_syncs(client, container, roots: Path) -> None:
    kb = await new_kb(container)
    (roots / "docs").mkdir()
    connector = await create(client, kb, "directory", {"path": str(roots / "docs")})
    assert (await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")).status_code == 202
    editor = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={kb: Role.EDITOR})
    abort = f"/api/knowledge-bases/{kb}/connectors/{connector}/abort"
    refused = await client.post(abort, headers=bearer(editor))
    assert refused.status_code == 403 and "admin only" in refused.json()["detail"]  # as sync, patch, delete
    assert (await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync",
                              headers=bearer(editor))).status_code == 403
    sync = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).json()["syncs"][0]
    assert sync["status"] == "PENDING"  # the refused abort changed nothing
    aborted = await client.post(abort)
    assert aborted.status_code == 200 and aborted.json()["status"] == "ABORTED"


NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
BOMB_BYTES = 100 * 1024 * 1024


def gzip_bomb(head: bytes, filler_bytes: int, tail: bytes) -> bytes:
    """``head`` + ``filler_bytes`` spaces + ``tail``, gzipped without ever holding the filler."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1024 * 1024)
    parts = [deflate.compress(head)]
    parts += [deflate.compress(block) for _ in range(filler_bytes // len(block))]
    return b"".join([*parts, deflate.compress(tail), deflate.flush()])


async def test_a_gzip_bomb_sitemap_is_refused_with_bounded_memory(client, container, site) -> None:
    """100 MiB of sitemap in ~100 KB of gzip. Python allocations during the sync (tracemalloc's
    peak) stay far below the bomb: it is inflated in 64 KiB pieces and refused at the sitemap limit
    (10 MiB by default) — before, the worker inflated it whole (up to the item limit, here 256 MiB)."""
    kb = await new_kb(container)
    page = site.put("/p.md", "# P\n\npage\n")
    bomb = gzip_bomb(f"<urlset {NS}><url><loc>{page}</loc></url>".encode(), BOMB_BYTES, b"</urlset>")
    assert len(bomb) < 200_000
    url = site.put("/sitemap.xml.gz", bomb, content_type="application/x-gzip")
    connector = await create(client, kb, "sitemap", {"url": url})
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors/{connector}/sync")
    assert r.status_code == 202
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        await container.connectors.runner.run_until_idle("w")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024, f"{peak} bytes allocated while reading a {BOMB_BYTES}-byte bomb"
    sync = (await client.get(f"/api/knowledge-bases/{kb}/connectors/{connector}")).json()["syncs"][0]
    assert sync["status"] == "FAILED" and sync["attempts"] == 1, sync
    assert "larger than the limit of 10485760 bytes (decompressed" in sync["error"]
    assert await docs_by_item(container, kb) == {}


async def test_hostile_and_oversized_sitemaps(client, container, site) -> None:
    kb = await new_kb(container)
    # a DTD with an entity, in UTF-16: the old byte check for "<!DOCTYPE" never saw it
    utf16 = ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE urlset [<!ENTITY p "' + site.url + '/p.md">]>'
             f'<urlset {NS}><url><loc>&p;</loc></url></urlset>').encode("utf-16")
    site.put("/p.md", "# P\n\npage\n")
    dtd = await create(client, kb, "sitemap", {"url": site.put("/utf16.xml", utf16, content_type="application/xml")})
    sync = await sync_now(client, container, kb, dtd)
    assert sync["status"] == "FAILED" and "DOCTYPE" in sync["error"], sync
    assert await docs_by_item(container, kb) == {}
    # more pages than CONNECTOR_MAX_ITEMS (5): the first five, and reading stops there
    many = f"<urlset {NS}>" + "".join(f"<url><loc>{site.url}/p{i}.md</loc></url>" for i in range(500)) + "</urlset>"
    for i in range(500):
        site.put(f"/p{i}.md", f"# P{i}\n\npage {i}\n")
    capped = await create(client, kb, "sitemap", {"url": site.put("/many.xml", many, content_type="application/xml")})
    sync = await sync_now(client, container, kb, capped)
    assert sync["status"] == "SUCCEEDED" and sync["counts"]["discovered"] == 5 and sync["counts"]["new"] == 5
    assert set(await docs_by_item(container, kb)) == {f"{site.url}/p{i}.md" for i in range(5)}


SECRETS = ("s3cret", "tok123", "sig999", "hunter2", "10.0.3.7")


async def test_connector_credentials_and_resolved_addresses_are_never_shown(
        client, container, site, monkeypatch) -> None:
    """The stored configuration keeps the credentials (a sync needs them); every response to a
    reader or an editor, and every error, shows the URLs without them. ``db.internal`` resolves to a
    private address through a patched ``socket.getaddrinfo`` (no internal DNS exists here)."""
    real_getaddrinfo = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
        if host == "db.internal":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.3.7", port or 80))]
        return real_getaddrinfo(host, port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    kb = await new_kb(container)
    port = site.url.rsplit(":", 1)[1]
    page = site.put("/a.md?token=tok123&lang=en", "# A\n\nthe page behind a token\n").replace(
        "http://", "http://alice:s3cret@")
    missing = f"http://bob:hunter2@127.0.0.1:{port}/gone.md?X-Amz-Signature=sig999&X-Amz-Expires=60"
    internal = "http://db.internal/export.md"
    config = {"urls": [page, missing, internal]}
    connector = await create(client, kb, "urls", config)
    sync = await sync_now(client, container, kb, connector)
    assert sync["counts"]["new"] == 1 and sync["counts"]["failed"] == 2, sync

    keys = ApiKeyRepository(container.infra.db)
    reader = await keys.create(is_admin=False, scopes={kb: Role.READER})
    editor = await keys.create(is_admin=False, scopes={kb: Role.EDITOR})
    base = f"/api/knowledge-bases/{kb}/connectors"
    docs = await docs_by_item(container, kb)
    paths = [base, f"{base}/{connector}", f"{base}/{connector}/syncs", f"/api/knowledge-bases/{kb}/documents",
             *(f"/api/documents/{d['id']}" for d in docs.values())]
    for token in (reader, editor):
        for path in paths:
            r = await client.get(path, headers=bearer(token))
            assert r.status_code == 200, (path, r.text)
            assert not any(s in r.text for s in SECRETS), (path, r.text)
    shown = (await client.get(f"{base}/{connector}", headers=bearer(reader))).json()
    assert shown["config"]["urls"][0] == page.replace("alice:s3cret", "REDACTED").replace("tok123", "REDACTED")
    errors = {e["external_id"]: e["error"] for e in shown["syncs"][0]["errors"]}
    assert "the address of host db.internal is not allowed (private" in errors[internal]
    shown_missing = f"http://REDACTED@127.0.0.1:{port}/gone.md?X-Amz-Signature=REDACTED&X-Amz-Expires=REDACTED"
    assert "404" in errors[shown_missing] and shown_missing in errors[shown_missing]
    assert not any(s in str(d["error_message"]) for d in docs.values() for s in SECRETS)

    # an editor sending the configuration back as shown keeps the stored credentials
    r = await client.patch(f"{base}/{connector}", headers=bearer(editor), json={"config": shown["config"]})
    assert r.status_code == 200 and "s3cret" not in r.text
    assert (await container.connectors.repository.get(kb, connector)).config == config
    assert (await client.get(f"{base}/{connector}")).json()["config"] == config  # an admin sees what is stored
    again = await sync_now(client, container, kb, connector)
    assert again["counts"]["skipped_active"] == 1 and again["counts"]["new"] == 0  # the same items as before

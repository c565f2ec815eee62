"""``/mcp`` gets the limits of ``/api`` (docs/security.md, "MCP over HTTP"): a chunked body over the
JSON limit is a 413; arguments that go into URL paths cannot climb into another route, and a tool's
in-process call has a deadline; GET streams count toward the key's streams with ``/events``, end on
time and end when the key is revoked; an outage is a 503 with Retry-After, never a 401."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from uuid import uuid4

import anyio
import httpx
import pytest
from mcp import Client

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.api.app import create_app
from ultimate_rag.api.slots import stream_slots
from ultimate_rag.client import ApiError, AsyncClient, RetryPolicy
from ultimate_rag.domain.auth import Role
from ultimate_rag.mcp_server import http as mcp_http
from ultimate_rag.mcp_server.tools import build_server
from ultimate_rag.testing.eventually import eventually

from .helpers import new_kb
from .test_mcp_access import first_text, mcp_client

JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
STREAM_HEADERS = {"Accept": "text/event-stream"}


async def test_a_chunked_mcp_body_over_the_limit_is_413(client: httpx.AsyncClient, container) -> None:
    limit = container.settings.max_json_body_bytes

    async def chunked():  # no Content-Length: the limit is applied while the body streams in
        for _ in range(limit // 65536 + 2):
            yield b" " * 65536

    r = await client.post("/mcp", headers=JSON_HEADERS, content=chunked())
    assert r.status_code == 413, r.text
    assert "larger than the limit" in r.json()["detail"]


async def test_ids_in_paths_are_uuids_and_escaped(client: httpx.AsyncClient, container) -> None:
    kb = await new_kb(container, "alpha")
    reader = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={kb: Role.READER})
    async with mcp_client(container, reader) as mcp:
        for bad in ("../../mcp", "..", "%2e%2e/mcp", "x/../../../mcp?"):
            for tool, args in (("get_document", {"document_id": bad}),
                               ("read_chunks", {"document_id": bad}),
                               ("read_chunks", {"document_id": str(uuid4()), "chunk_id": bad})):
                result = await mcp.call_tool(tool, args)
                assert result.is_error and "must be a UUID" in first_text(result), (tool, bad)
    # the client escapes every segment itself, whoever calls it: a path never leaves its route (a
    # 422 for an id that is no UUID, or the router's 404 for an escaped "/"), never reaches /mcp
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request.url.raw_path.decode())

    client.event_hooks["request"].append(record)
    async with AsyncClient(http=client, retry=RetryPolicy(retries=0)) as rag:
        for bad in ("../../mcp", "..", ".", "a/b", "a?b=1", "a#b"):
            with pytest.raises(ApiError) as caught:
                await rag.get_document(bad)
            assert caught.value.status_code in (404, 422), (bad, caught.value)
    assert all(path.startswith("/api/documents/") and "/" not in path[len("/api/documents/"):] for path in seen), seen


async def test_an_in_process_call_that_never_ends_is_stopped(container) -> None:
    async def never_answers(scope, receive, send) -> None:  # stands for a call that never ends (the
        await anyio.sleep_forever()                       # recursion into /mcp the timeout once missed)

    @asynccontextmanager
    async def client_for(ctx):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=never_answers), base_url="http://x") as http:
            yield AsyncClient(http=http, retry=RetryPolicy(retries=0))

    server = build_server(client_for, local_files=False, call_timeout=0.3)
    async with Client(server) as mcp:
        result = await asyncio.wait_for(mcp.call_tool("list_knowledge_bases", {}), 60)
    assert result.is_error and "took longer than 0.3 s" in first_text(result)


@pytest.fixture
async def streams(container):
    app = create_app(container=container)
    kb = await new_kb(container, "streams")
    repo = ApiKeyRepository(container.infra.db)
    key = await repo.create(is_admin=False, scopes={kb: Role.READER})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                                 headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        yield {"app": app, "http": http, "key": key, "prefix": key.split("_")[1], "repo": repo}


async def test_a_get_stream_counts_toward_the_keys_streams(streams, container) -> None:
    slots = stream_slots(streams["app"].state, container.settings)
    held = [slots.take(streams["prefix"]) for _ in range(container.settings.max_event_streams_per_key)]
    r = await streams["http"].get("/mcp", headers=STREAM_HEADERS)
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert "streams" in r.json()["detail"]
    held.pop()()  # one closes: the next stream is served (and ends on its own, see below)


async def test_a_get_stream_ends_on_time(streams, monkeypatch) -> None:
    monkeypatch.setattr(mcp_http, "STREAM_SECONDS", 0.5)
    r = await asyncio.wait_for(streams["http"].get("/mcp", headers=STREAM_HEADERS), 60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")


async def test_a_get_stream_ends_when_its_key_is_revoked(streams, container, monkeypatch) -> None:
    monkeypatch.setattr(mcp_http, "STREAM_SECONDS", 3600.0)  # only the revocation can end it
    container.settings.event_stream_key_check_seconds = 0.05
    slots = stream_slots(streams["app"].state, container.settings)
    request = asyncio.create_task(streams["http"].get("/mcp", headers=STREAM_HEADERS))
    await eventually(lambda: streams["prefix"] in slots.open, what="the stream is open")
    await streams["repo"].revoke(streams["prefix"])
    r = await asyncio.wait_for(request, 60)
    assert r.status_code == 200
    assert streams["prefix"] not in slots.open  # its slot is free again


async def test_an_outage_while_checking_the_key_is_503_with_retry_after(streams, container) -> None:
    await container.infra.db.close()  # the API's pool is gone: no key can be checked
    r = await streams["http"].post("/mcp", headers=JSON_HEADERS, json={})
    assert r.status_code == 503 and r.headers["retry-after"] == "5", r.text
    assert "try again" in r.json()["detail"] and "pool" not in r.text.lower()
    api = await streams["http"].get("/api/knowledge-bases")  # the /api gate answers the same way
    assert api.status_code == 503 and api.headers["retry-after"] == "5" and "pool" not in api.text.lower()

"""``/mcp`` (MCP over Streamable HTTP) next to the isolation matrix: it is not in the OpenAPI schema,
so its access rules are checked here. The key is checked before the body is read; then every tool
call has exactly the key's scopes (a reader cannot write, another knowledge base does not exist)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.api.app import create_app
from ultimate_rag.domain.auth import Role

from .helpers import new_kb

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture
async def keys(container):
    a, b = await new_kb(container, "alpha"), await new_kb(container, "beta")
    repo = ApiKeyRepository(container.infra.db)
    revoked = await repo.create(is_admin=True, scopes={})
    await repo.revoke(revoked.split("_")[1])
    return {"a": a, "b": b, "admin": container.settings.admin_key, "revoked": revoked,
            "reader A": await repo.create(is_admin=False, scopes={a: Role.READER}),
            "editor A": await repo.create(is_admin=False, scopes={a: Role.EDITOR})}


def mcp_client(container, key: str) -> Client:
    app = create_app(container=container)
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://test",
                              headers={"Authorization": f"Bearer {key}"}, timeout=60)
    return Client(streamable_http_client("http://test/mcp", http_client=http))


def first_text(result: Any) -> str:
    """The text of a tool result's first content block (tool errors come back as text)."""
    return result.content[0].text


def payload(result: Any) -> Any:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("header", [None, "Bearer ", "Bearer not-a-key", "Basic abc", "revoked"])
async def test_mcp_refuses_a_missing_or_bad_key_before_reading_the_body(client: httpx.AsyncClient, keys,
                                                                       header) -> None:
    if header == "revoked":
        header = f"Bearer {keys['revoked']}"
    headers = {"Accept": "application/json, text/event-stream"}
    if header is not None:
        headers["Authorization"] = header
    else:
        client.headers.pop("Authorization", None)

    async def body():
        raise AssertionError("the body was read before the key was checked")
        yield b""  # pragma: no cover

    r = await client.post("/mcp", headers={**headers, "Content-Type": "application/json"}, content=body())
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert "key" in r.json()["detail"]


async def test_mcp_is_not_in_the_openapi_schema_and_answers_a_good_key(client: httpx.AsyncClient, keys) -> None:
    assert not any(p.startswith("/mcp") for p in (await client.get("/openapi.json")).json()["paths"])
    r = await client.post("/mcp", json=INIT, headers={"Authorization": f"Bearer {keys['reader A']}",
                                                      "Accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["serverInfo"]["name"] == "ultimate-rag"


async def test_a_reader_key_reads_its_knowledge_base_and_nothing_else(container, keys) -> None:
    async with mcp_client(container, keys["reader A"]) as mcp:
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert {"list_knowledge_bases", "search", "get_document", "read_chunks", "answer", "upload_document",
                "reindex"} <= names
        listed = payload(await mcp.call_tool("list_knowledge_bases", {}))
        assert [kb["name"] for kb in listed["knowledge_bases"]] == ["alpha"]
        assert listed["knowledge_bases"][0]["document_counts"] == {}  # counted (none yet), never null

        found = await mcp.call_tool("search", {"knowledge_base": "alpha", "query": "anything"})
        assert not found.is_error and payload(found)["results"] == []
        named = payload(await mcp.call_tool("search", {"knowledge_base": "alpha", "query": "ticket SR-404?"}))
        assert named["unmatched_identifiers"] == ["SR-404"]  # found nowhere: said so
        for other in ("beta", str(keys["b"])):  # by name or by id: it does not exist for this key
            refused = await mcp.call_tool("search", {"knowledge_base": other, "query": "anything"})
            assert refused.is_error and "no knowledge base" in first_text(refused)

        write = await mcp.call_tool("upload_document", {"knowledge_base": "alpha", "filename": "n.md",
                                                        "text": "# N\n\nnew"})
        assert write.is_error and "may not modify" in first_text(write) and "403" in first_text(write)
        reindex = await mcp.call_tool("reindex", {"knowledge_base": "alpha"})
        assert reindex.is_error and "403" in first_text(reindex)
        local = await mcp.call_tool("upload_document", {"knowledge_base": "alpha", "filename": "p",
                                                        "path": "/etc/passwd"})
        assert local.is_error and "only available over stdio" in first_text(local)
    rows = await container.infra.db.fetchall("SELECT id FROM documents")
    assert rows == []


async def test_an_editor_key_uploads_and_another_kbs_document_is_invisible(container, keys) -> None:
    async with mcp_client(container, keys["editor A"]) as mcp:
        up = await mcp.call_tool("upload_document", {"knowledge_base": str(keys["a"]), "filename": "notes.md",
                                                     "text": "# Notes\n\nAgents write here."})
        assert not up.is_error, first_text(up)
        doc = payload(up)
        assert doc["filename"] == "notes.md" and doc["knowledge_base_id"] == str(keys["a"])
        got = payload(await mcp.call_tool("get_document", {"document_id": doc["id"]}))
        assert got["status"] in ("PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "READY")

    async with mcp_client(container, (await ApiKeyRepository(container.infra.db).create(
            is_admin=False, scopes={keys["b"]: Role.EDITOR}))) as other:
        hidden = await other.call_tool("get_document", {"document_id": doc["id"]})
        assert hidden.is_error and "not found" in first_text(hidden) and "404" in first_text(hidden)

"""The MCP server against a real running deployment, through the official SDK's client: over stdio
(``ultimate-rag mcp``, a subprocess talking HTTP to the server with its key) and over Streamable
HTTP at ``/mcp``. A reader key searches and cannot write; an editor key uploads; another knowledge
base is invisible."""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ultimate_rag.client import Client as RagClient

pytestmark = pytest.mark.acceptance

DOC = "# Tides\n\n## Spring tides\n\nSpring tides happen at new and full moon, when the sun and moon align.\n"


def stdio(live, key: str) -> Client:
    env = {"ULTIMATE_RAG_URL": live.url, "ULTIMATE_RAG_API_KEY": key, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "ultimate_rag.cli", "mcp"], env=env))


def over_http(live, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    return Client(streamable_http_client(f"{live.url}/mcp", http_client=http))


def first_text(result: Any) -> str:
    """The text of a tool result's first content block (tool errors come back as text)."""
    return result.content[0].text


def payload(result: Any) -> Any:
    assert not result.is_error, first_text(result)
    return json.loads(result.content[0].text)


@pytest.fixture(scope="module")
def world(live):
    kb, other = live.new_kb("tides"), live.new_kb("secret")
    with RagClient(live.url, live.admin_key) as rag:
        doc = rag.upload(kb["id"], DOC.encode(), filename="tides.md")
        hidden = rag.upload(other["id"], b"# Secret\n\nThe vault code is in the other base.\n", filename="s.md")
        rag.wait_until_ready([doc.id, hidden.id], timeout=300)
    return {"kb": kb, "other": other, "doc": doc.id, "hidden": hidden.id,
            "reader": live.key(kb["id"], "reader"), "editor": live.key(kb["id"], "editor")}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_reader_session_searches_with_citations_and_cannot_write(live, world, transport) -> None:
    connect = stdio if transport == "stdio" else over_http
    async with connect(live, world["reader"]) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert {"list_knowledge_bases", "search", "get_document", "read_chunks", "answer", "upload_document",
                "reindex"} <= set(tools)
        assert tools["search"].annotations is not None
        assert tools["search"].annotations.read_only_hint is True

        kbs = payload(await mcp.call_tool("list_knowledge_bases", {}))["knowledge_bases"]
        assert [k["name"] for k in kbs] == [world["kb"]["name"]]

        found = payload(await mcp.call_tool("search", {"knowledge_base": world["kb"]["name"],
                                                       "query": "when do spring tides happen?", "top_k": 3}))
        hit = found["results"][0]
        assert hit["document_id"] == world["doc"] and "new and full moon" in hit["content"]
        assert hit["filename"] == "tides.md" and hit["heading_path"][-1] == "Spring tides"
        assert hit["citation"].startswith("tides.md · Tides > Spring tides")

        window = payload(await mcp.call_tool("read_chunks", {"document_id": world["doc"], "chunk_id": hit["chunk_id"]}))
        assert any(c["hit"] and c["chunk_id"] == hit["chunk_id"] for c in window["chunks"])
        status = payload(await mcp.call_tool("get_document", {"document_id": world["doc"]}))
        assert status["status"] == "READY" and status["filename"] == "tides.md"

        refused = await mcp.call_tool("upload_document", {"knowledge_base": world["kb"]["id"], "filename": "x.md",
                                                          "text": "# X\n\nnot allowed"})
        assert refused.is_error and "may not modify" in first_text(refused)
        assert (await mcp.call_tool("reindex", {"document_id": world["doc"]})).is_error

        for probe in ({"knowledge_base": world["other"]["name"], "query": "vault code"},
                      {"knowledge_base": world["other"]["id"], "query": "vault code"}):
            assert (await mcp.call_tool("search", probe)).is_error
        hidden = await mcp.call_tool("get_document", {"document_id": world["hidden"]})
        assert hidden.is_error and "not found" in first_text(hidden)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_editor_session_uploads_text_and_files(live, world, transport, tmp_path) -> None:
    connect = stdio if transport == "stdio" else over_http
    async with connect(live, world["editor"]) as mcp:
        text = payload(await mcp.call_tool("upload_document", {
            "knowledge_base": world["kb"]["name"], "filename": f"{transport}-notes.md",
            "text": f"# Notes\n\nUploaded over {transport} by an agent."}))
        assert text["status"] in ("PENDING", "PARSING") and text["filename"] == f"{transport}-notes.md"
        csv = b"city,tide\nBrest,7m\n"
        if transport == "stdio":  # a local file of the agent's machine
            (tmp_path / "tides.csv").write_bytes(csv)
            args = {"path": str(tmp_path / "tides.csv")}
        else:
            args = {"content_base64": base64.b64encode(csv).decode()}
        file = payload(await mcp.call_tool("upload_document", {"knowledge_base": world["kb"]["id"],
                                                               "filename": f"{transport}-tides.csv", **args}))
        assert file["size_bytes"] == len(csv)
        other = await mcp.call_tool("upload_document", {"knowledge_base": world["other"]["name"],
                                                        "filename": "y.md", "text": "# Y"})
        assert other.is_error and "no knowledge base" in first_text(other)
    with RagClient(live.url, live.admin_key) as rag:
        done = rag.wait_until_ready([text["id"], file["id"]], timeout=300)
        assert [d.status for d in done] == ["READY", "READY"], [d.error_message for d in done]


async def test_without_a_key_the_http_transport_answers_401(live) -> None:
    async with httpx2.AsyncClient() as http:
        r = await http.post(f"{live.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 401 and "missing API key" in r.json()["detail"]


async def test_the_answer_tool_without_a_model_gives_the_passages_and_the_reason(live, world) -> None:
    """No LLM is configured here. A server without the answer endpoint gets a clear tool error."""
    has_answers = "/api/knowledge-bases/{kb_id}/answer" in httpx2.get(f"{live.url}/openapi.json").json()["paths"]
    async with over_http(live, world["reader"]) as mcp:
        result = await mcp.call_tool("answer", {"knowledge_base": world["kb"]["name"],
                                                "question": "When do spring tides happen?"})
    if not has_answers:
        assert result.is_error and "no answer endpoint" in first_text(result)
        return
    data = payload(result)
    assert data["answer"] is None and data["reason"]
    assert data["citations"][0]["filename"] == "tides.md" and data["citations"][0]["citation"].startswith("tides.md")


async def test_metadata_through_the_tools(live, world) -> None:
    """Fields set at upload and by update_document_metadata, a search filtered on them, and a reader
    that sees them and cannot change them (over /mcp: stdio runs the same tools)."""
    async with over_http(live, world["editor"]) as mcp:
        doc = payload(await mcp.call_tool("upload_document", {
            "knowledge_base": world["kb"]["name"], "filename": "neap.md", "metadata": {"season": "spring"},
            "text": "# Neap tides\n\nNeap tides happen at the quarter moons, when the sun and moon pull apart."}))
        assert doc["metadata"] == {"season": "spring"}
        with RagClient(live.url, live.admin_key) as rag:
            rag.wait_until_ready([doc["id"]], timeout=300)
        changed = payload(await mcp.call_tool("update_document_metadata", {
            "document_id": doc["id"], "metadata": {"season": "autumn", "depth_m": 4.5}}))
        assert changed["metadata"]["season"] == "autumn" and changed["metadata"]["doc"]["title"] == "Neap tides"
        found = payload(await mcp.call_tool("search", {"knowledge_base": world["kb"]["name"], "query": "tides",
                                                       "filters": {"metadata": {"depth_m": {"$gt": 4}}}}))
        assert {h["document_id"] for h in found["results"]} == {doc["id"]}
        assert found["results"][0]["metadata"]["season"] == "autumn"
        bad = await mcp.call_tool("search", {"knowledge_base": world["kb"]["name"], "query": "tides",
                                             "filters": {"metadata": {"depth_m": {"$gt": "deep"}}}})
        assert bad.is_error and "filters.metadata.depth_m.$gt" in first_text(bad)
    async with over_http(live, world["reader"]) as mcp:
        assert payload(await mcp.call_tool("get_document", {"document_id": doc["id"]}))["metadata"]["depth_m"] == 4.5
        refused = await mcp.call_tool("update_document_metadata", {"document_id": doc["id"], "metadata": {"a": 1}})
        assert refused.is_error and "may not modify" in first_text(refused)

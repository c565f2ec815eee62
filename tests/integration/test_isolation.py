"""The isolation matrix (SPEC §11): every route the app mounts — ``/api``, ``/v1`` (the
OpenAI-compatible API), ``/mcp`` and the public pages, enumerated from the app itself, not only its
OpenAPI schema — called by an admin key, a reader and an editor of knowledge base A, an editor of knowledge base B,
a revoked key, an expired key and no key. The rules are listed per route: a new route without a
rule fails this test. Behind ``/mcp``, each MCP tool gets the same matrix (a tool without a rule
fails too)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
from starlette.routing import Mount

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.api.app import create_app
from ultimate_rag.domain.auth import Role
from ultimate_rag.mcp_server import http as mcp_http
from ultimate_rag.settings import Settings

from .helpers import new_kb, queue_document
from .test_mcp_access import INIT, first_text, mcp_client

PUBLIC, ANY_KEY, ADMIN = "public", "any key", "admin"
KB_READ, KB_EDIT, DOC_READ, DOC_EDIT = "kb read", "kb edit", "doc read", "doc edit"

RULES = {
    ("GET", "/healthz"): PUBLIC, ("GET", "/readyz"): PUBLIC, ("GET", "/metrics"): PUBLIC,
    ("GET", "/api/knowledge-bases"): ANY_KEY,
    ("POST", "/api/knowledge-bases"): ADMIN,
    ("GET", "/api/knowledge-bases/{kb_id}"): KB_READ,
    ("DELETE", "/api/knowledge-bases/{kb_id}"): ADMIN,
    ("POST", "/api/knowledge-bases/{kb_id}/documents"): KB_EDIT,
    ("GET", "/api/knowledge-bases/{kb_id}/documents"): KB_READ,
    ("POST", "/api/knowledge-bases/{kb_id}/reindex"): KB_EDIT,
    ("POST", "/api/knowledge-bases/{kb_id}/embedding-migration"): KB_EDIT,
    ("GET", "/api/knowledge-bases/{kb_id}/embedding-migration"): KB_READ,
    ("DELETE", "/api/knowledge-bases/{kb_id}/embedding-migration"): KB_EDIT,
    ("GET", "/api/knowledge-bases/{kb_id}/reindex"): KB_READ,
    ("POST", "/api/knowledge-bases/{kb_id}/search"): KB_READ,
    ("POST", "/api/knowledge-bases/{kb_id}/answer"): KB_READ,
    ("POST", "/api/knowledge-bases/{kb_id}/connectors"): KB_EDIT,
    ("GET", "/api/knowledge-bases/{kb_id}/connectors"): KB_READ,
    ("GET", "/api/knowledge-bases/{kb_id}/connectors/{connector_id}"): KB_READ,
    ("PATCH", "/api/knowledge-bases/{kb_id}/connectors/{connector_id}"): KB_EDIT,
    ("DELETE", "/api/knowledge-bases/{kb_id}/connectors/{connector_id}"): KB_EDIT,
    ("POST", "/api/knowledge-bases/{kb_id}/connectors/{connector_id}/sync"): KB_EDIT,
    ("POST", "/api/knowledge-bases/{kb_id}/connectors/{connector_id}/abort"): KB_EDIT,
    ("GET", "/api/knowledge-bases/{kb_id}/connectors/{connector_id}/syncs"): KB_READ,
    ("GET", "/api/documents/stuck"): ADMIN,
    ("GET", "/api/documents/{document_id}"): DOC_READ,
    ("DELETE", "/api/documents/{document_id}"): DOC_EDIT,
    ("PATCH", "/api/documents/{document_id}"): DOC_EDIT,
    ("GET", "/api/documents/{document_id}/chunks"): DOC_READ,
    ("GET", "/api/documents/{document_id}/snapshot"): DOC_READ,
    ("GET", "/api/documents/{document_id}/source"): DOC_READ,
    ("GET", "/api/documents/{document_id}/assets/{asset_id}"): DOC_READ,
    ("POST", "/api/documents/{document_id}/reindex"): DOC_EDIT,
    ("PUT", "/api/documents/{document_id}/content"): DOC_EDIT,
    ("POST", "/api/documents/{document_id}/fail"): DOC_EDIT,
    ("POST", "/api/documents/{document_id}/recover"): DOC_EDIT,
    ("GET", "/api/keys"): ADMIN, ("POST", "/api/keys"): ADMIN, ("DELETE", "/api/keys/{key_id}"): ADMIN,
    ("GET", "/api/audit"): ADMIN,
    ("GET", "/api/knowledge-bases/{kb_id}/events"): KB_READ,
    ("GET", "/api/statuses"): ANY_KEY,
    # outside the OpenAPI schema: the schema itself, the workbench, the API docs, MCP over HTTP
    ("GET", "/openapi.json"): PUBLIC, ("GET", "/"): PUBLIC, ("GET", "/docs"): PUBLIC,
    ("POST", "/mcp"): ANY_KEY, ("GET", "/mcp"): ANY_KEY, ("DELETE", "/mcp"): ANY_KEY,
    # the OpenAI-compatible API (SPEC §10): a model is a knowledge base, by name or id
    ("GET", "/v1/models"): ANY_KEY, ("GET", "/v1/models/{model}"): KB_READ,
    ("POST", "/v1/chat/completions"): KB_READ,
}
MCP_METHODS = {"GET", "POST", "DELETE"}  # a raw ASGI route takes any method; these are MCP's
PRINCIPALS = ["admin", "reader A", "editor A", "editor B", "revoked", "expired", "none"]


def expected(rule: str, who: str) -> str:
    """'ok' (authorised: any answer but 401/403/404), or the exact refusal."""
    if rule == PUBLIC:
        return "ok"
    if who in ("revoked", "expired", "none"):
        return "401"
    if who == "admin" or rule == ANY_KEY:
        return "ok"
    if rule == ADMIN:
        return "404" if who == "editor B" and "{kb_id}" in current_path else "403"
    if who == "editor B":
        return "404"  # what a key may not see does not exist for it
    if rule in (KB_EDIT, DOC_EDIT) and who == "reader A":
        return "403"
    return "ok"


current_path = ""


@pytest.fixture
async def world(container):
    a, b = await new_kb(container, "A"), await new_kb(container, "B")
    keys = ApiKeyRepository(container.infra.db)
    tokens = {
        "admin": container.settings.admin_key,
        "reader A": await keys.create(is_admin=False, scopes={a: Role.READER}),
        "editor A": await keys.create(is_admin=False, scopes={a: Role.EDITOR}),
        "editor B": await keys.create(is_admin=False, scopes={b: Role.EDITOR}),
        "revoked": await keys.create(is_admin=True, scopes={}),
        "expired": await keys.create(is_admin=True, scopes={}, expires_at=datetime.now(UTC) + timedelta(seconds=1)),
    }
    await keys.revoke(tokens["revoked"].split("_")[1])
    await container.infra.db.execute("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE prefix = %s",
                               (tokens["expired"].split("_")[1],))
    return {"a": a, "b": b, "tokens": tokens}


async def document_with_asset(container, kb: UUID) -> tuple[UUID, UUID]:
    doc = await queue_document(container, kb, "some text")
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
    asset, key = uuid4(), f"{kb}/{doc}/assets/a.png"
    await container.infra.storage.put(key, b"\x89PNG fake bytes", "image/png")
    await container.infra.db.execute(
        "INSERT INTO document_assets (id, document_id, knowledge_base_id, object_key, mime_type, size_bytes,"
        " locator_key) VALUES (%s, %s, %s, %s, 'image/png', 15, 'p1')", (asset, doc, kb, key))
    await container.infra.snapshots.save(knowledge_base_id=kb, document_id=doc, snapshot={"chunks": []})
    return doc, asset


def mounted_routes() -> set[tuple[str, str]]:
    """(method, path) of every route the app serves, whether its schema lists it or not; static
    file mounts (``/web``, ``/docs-assets``: the workbench's and the docs' own files) aside."""
    routes: set[tuple[str, str]] = set()
    for top in create_app(Settings()).routes:
        included = getattr(top, "original_router", None)  # an included router: its routes carry their prefix
        for route in included.routes if included is not None else [top]:
            if isinstance(route, Mount):
                continue
            methods = getattr(route, "methods", None) or MCP_METHODS
            routes |= {(m, str(getattr(route, "path", ""))) for m in methods if m not in ("HEAD", "OPTIONS")}
    return routes


MOUNTED = mounted_routes()


async def test_every_route_has_a_rule(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    in_schema = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert in_schema <= MOUNTED and ("POST", "/mcp") in MOUNTED
    assert MOUNTED - set(RULES) == set(), "add an access rule for each new route"
    assert set(RULES) - MOUNTED == set(), "a rule for a route this build does not mount"


@pytest.mark.parametrize(("method", "path"), sorted(RULES))
async def test_isolation_matrix(client: httpx.AsyncClient, container, world, monkeypatch, method: str,
                                path: str) -> None:
    global current_path
    current_path = path
    monkeypatch.setattr(mcp_http, "STREAM_SECONDS", 0.2)  # a GET /mcp stream ends at once
    rule = RULES[(method, path)]
    for who in PRINCIPALS:
        kb = world["a"] if not (path == "/api/knowledge-bases/{kb_id}" and method == "DELETE" and who == "admin") \
            else await new_kb(container)  # the admin really deletes: give it its own
        doc, asset = await document_with_asset(container, world["a"])
        victim = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={world["a"]: Role.READER})
        connector = await container.connectors.repository.create(  # a fresh one: an admin really deletes
            world["a"], kind="urls", name="", config={"urls": ["https://example.com/a.md"]}, schedule_seconds=None)
        params = {"kb_id": kb, "document_id": doc, "asset_id": asset, "key_id": victim.split("_")[1],
                  "connector_id": connector.id, "model": kb}
        url = path.format(**params)
        token = world["tokens"].get(who)
        headers = {"Authorization": f"Bearer {token}" if token else ""}
        kwargs: dict = {}
        if (path.endswith("/documents") and method == "POST") or path.endswith("/content"):
            kwargs["files"] = {"file": ("n.md", b"# N\n\nnew text\n")}
        elif method == "POST" and path == "/api/knowledge-bases":
            kwargs["json"] = {"name": f"kb-{uuid4().hex[:8]}"}
        elif path.endswith("/search"):
            kwargs["json"] = {"query": "text"}
        elif path == "/api/documents/{document_id}" and method == "PATCH":
            kwargs["json"] = {"metadata": {"team": "x"}}
        elif path.endswith("/answer"):
            kwargs["json"] = {"question": "text"}
        elif path.endswith("/embedding-migration") and method == "POST":
            kwargs["json"] = {"embedder": "local"}
        elif path.endswith("/connectors") and method == "POST":
            kwargs["json"] = {"kind": "urls", "config": {"urls": ["https://example.com/b.md"]}}
        elif "{connector_id}" in path and method == "PATCH":
            kwargs["json"] = {"name": "renamed"}
        elif path == "/api/keys" and method == "POST":
            kwargs["json"] = {"admin": True}
        elif path.endswith("/events"):
            kwargs["params"] = {"max_seconds": 1}  # the stream ends by itself; the test transport waits for it
        elif path == "/mcp":
            headers["Accept"] = "text/event-stream" if method == "GET" else "application/json, text/event-stream"
            if method == "POST":
                kwargs["json"] = INIT
        elif path == "/v1/chat/completions":
            kwargs["json"] = {"model": str(kb), "messages": [{"role": "user", "content": "text"}]}
        r = await client.request(method, url, headers=headers, **kwargs)
        want = expected(rule, who)
        if want == "ok":
            assert r.status_code not in (401, 403, 404), (who, method, url, r.status_code, r.text)
            assert r.status_code < 500
        else:
            assert str(r.status_code) == want, (who, method, url, r.status_code, r.text)
            assert "detail" in r.json() or (path.startswith("/v1/") and "error" in r.json())
            assert str(doc) not in r.text and str(kb) not in r.text  # a refusal says nothing about the resource


async def test_a_key_of_another_knowledge_base_cannot_probe_ids(client: httpx.AsyncClient, container, world) -> None:
    doc, _ = await document_with_asset(container, world["a"])
    h = {"Authorization": f"Bearer {world['tokens']['editor B']}"}
    existing = await client.get(f"/api/documents/{doc}", headers=h)
    missing = await client.get(f"/api/documents/{uuid4()}", headers=h)
    assert existing.status_code == missing.status_code == 404 and existing.json() == missing.json()
    listed = (await client.get("/api/knowledge-bases", headers=h)).json()["items"]
    assert [k["id"] for k in listed] == [str(world["b"])]
    # search is confined to the key's knowledge base whatever the filters say: naming another
    # knowledge base's document finds nothing, and a knowledge-base filter does not exist (422)
    r = await client.post(f"/api/knowledge-bases/{world['b']}/search", headers=h,
                          json={"query": "some text", "filters": {"document_ids": [str(doc)]}})
    assert r.status_code == 200 and r.json()["results"] == []
    r = await client.post(f"/api/knowledge-bases/{world['b']}/search", headers=h,
                          json={"query": "some text", "filters": {"knowledge_base_id": str(world["a"])}})
    assert r.status_code == 422 and str(world["a"]) not in r.text
    # the OpenAI-compatible API: A is not a model for B's key, by name or by id, and its refusal is
    # the same as for a model that never existed
    models = (await client.get("/v1/models", headers=h)).json()["data"]
    assert [m["id"] for m in models] == ["B"]
    refusals = []
    for model in ("A", str(world["a"]), "never-existed"):
        r = await client.post("/v1/chat/completions", headers=h,
                              json={"model": model, "messages": [{"role": "user", "content": "some text"}]})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found", r.text
        assert str(world["a"]) not in r.text and str(doc) not in r.text and "some text" not in r.text
        refusals.append(r.json())
        r = await client.get(f"/v1/models/{model}", headers=h)
        assert r.status_code == 404 and str(world["a"]) not in r.text
    assert refusals[0] == refusals[1] == refusals[2]


# The MCP tools, each with the rule of the REST route it calls (the tool calls /api with the
# caller's key, so the API's own checks decide); a key that fails at /mcp itself is the route
# matrix's ("POST", "/mcp") row above.
TOOL_RULES = {
    "list_knowledge_bases": ANY_KEY, "search": KB_READ, "answer": KB_READ, "get_document": DOC_READ,
    "read_chunks": DOC_READ, "upload_document": KB_EDIT, "reindex": DOC_EDIT,
    "update_document_metadata": DOC_EDIT,
}


def tool_arguments(tool: str, kb: UUID, doc: UUID) -> dict:
    arguments: dict[str, dict[str, Any]] = {
        "list_knowledge_bases": {}, "search": {"knowledge_base": str(kb), "query": "text"},
        "answer": {"knowledge_base": str(kb), "question": "text"}, "get_document": {"document_id": str(doc)},
        "read_chunks": {"document_id": str(doc)},
        "upload_document": {"knowledge_base": str(kb), "filename": "n.md", "text": "# N\n\nnew text"},
        "reindex": {"document_id": str(doc)},
        "update_document_metadata": {"document_id": str(doc), "metadata": {"team": "x"}}}
    return arguments[tool]


async def test_every_mcp_tool_has_a_rule(container) -> None:
    async with mcp_client(container, container.settings.admin_key) as mcp:
        tools = {t.name for t in (await mcp.list_tools()).tools}
    assert tools == set(TOOL_RULES), "add an access rule for each new MCP tool"


@pytest.mark.parametrize("tool", sorted(TOOL_RULES))
async def test_mcp_tool_isolation_matrix(container, world, tool: str) -> None:
    global current_path
    current_path = "{kb_id}" if TOOL_RULES[tool] in (KB_READ, KB_EDIT) else "{document_id}"
    for who in ("admin", "reader A", "editor A", "editor B"):
        doc, _ = await document_with_asset(container, world["a"])
        async with mcp_client(container, world["tokens"][who]) as mcp:
            result = await mcp.call_tool(tool, tool_arguments(tool, world["a"], doc))
        text = first_text(result)
        want = expected(TOOL_RULES[tool], who)
        if want == "ok":
            assert not (result.is_error and any(f"HTTP {s}" in text for s in (401, 403, 404))), (who, tool, text)
        elif want == "403":
            assert result.is_error and "HTTP 403" in text, (who, tool, text)
        else:
            assert result.is_error and ("HTTP 404" in text or "no knowledge base" in text), (who, tool, text)
            assert str(doc) not in text  # says nothing about the resource
        if tool == "list_knowledge_bases" and who == "editor B":
            assert str(world["a"]) not in text and '"A"' not in text

"""The isolation matrix (SPEC §11): every route in the OpenAPI schema, called by an admin key, a
reader and an editor of knowledge base A, an editor of knowledge base B, a revoked key, an expired
key and no key. The rules are listed per route: a new route without a rule fails this test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import httpx
import pytest

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain.auth import Role

from .helpers import new_kb, queue_document

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
    # the OpenAI-compatible API: a model is a knowledge base (kb A is named "A")
    ("GET", "/v1/models"): ANY_KEY, ("GET", "/v1/models/{model}"): KB_READ,
    ("POST", "/v1/chat/completions"): KB_READ,
}
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


async def test_every_route_has_a_rule(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    routes = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert routes - set(RULES) == set(), "add an access rule for each new route"
    assert set(RULES) - routes == set()


@pytest.mark.parametrize(("method", "path"), sorted(RULES))
async def test_isolation_matrix(client: httpx.AsyncClient, container, world, method: str, path: str) -> None:
    global current_path
    current_path = path
    rule = RULES[(method, path)]
    for who in PRINCIPALS:
        kb = world["a"] if not (path == "/api/knowledge-bases/{kb_id}" and method == "DELETE" and who == "admin") \
            else await new_kb(container)  # the admin really deletes: give it its own
        doc, asset = await document_with_asset(container, world["a"])
        victim = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={world["a"]: Role.READER})
        connector = await container.connectors.repository.create(  # a fresh one: an admin really deletes
            world["a"], kind="urls", name="", config={"urls": ["https://example.com/a.md"]}, schedule_seconds=None)
        params = {"kb_id": kb, "document_id": doc, "asset_id": asset, "key_id": victim.split("_")[1],
                  "connector_id": connector.id, "model": "A"}
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
        elif path.endswith("/chat/completions"):
            kwargs["json"] = {"model": "A", "messages": [{"role": "user", "content": "text"}]}
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
        r = await client.request(method, url, headers=headers, **kwargs)
        want = expected(rule, who)
        if want == "ok":
            assert r.status_code not in (401, 403, 404), (who, method, url, r.status_code, r.text)
            assert r.status_code < 500
        else:
            assert str(r.status_code) == want, (who, method, url, r.status_code, r.text)
            assert "detail" in r.json()
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

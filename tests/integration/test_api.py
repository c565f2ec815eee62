"""The HTTP API (SPEC §11) over the real database, files and model."""

from __future__ import annotations

import asyncio
import hashlib

import httpx
import pytest

from ultimate_rag.services.job_loop import WorkerConfig

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"


async def make_kb(client: httpx.AsyncClient, name: str = "docs") -> str:
    r = await client.post("/api/knowledge-bases", json={"name": name, "description": "d"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def upload(client: httpx.AsyncClient, kb: str, name: str, data: bytes, ctype: str = "text/plain") -> httpx.Response:
    return await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data, ctype)})


async def process_all(container) -> None:
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()


async def test_every_api_route_requires_a_key(client: httpx.AsyncClient) -> None:
    kb = await make_kb(client)
    for method, path in [("GET", "/api/knowledge-bases"), ("POST", "/api/knowledge-bases"),
                         ("GET", f"/api/knowledge-bases/{kb}"), ("GET", f"/api/knowledge-bases/{kb}/documents"),
                         ("POST", f"/api/knowledge-bases/{kb}/search"),
                         ("GET", "/api/documents/00000000-0000-0000-0000-000000000000")]:
        for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
            r = await client.request(method, path, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert "detail" in r.json()


async def test_health_endpoints_need_no_key(client: httpx.AsyncClient) -> None:
    anon = {"Authorization": ""}
    assert (await client.get("/healthz", headers=anon)).json() == {"status": "ok"}
    r = await client.get("/readyz", headers=anon)
    assert r.status_code == 200 and r.json()["database"] is True
    r = await client.get("/metrics", headers=anon)
    assert r.status_code == 200 and "ultimate_rag_documents" in r.text
    assert (await client.get("/docs", headers=anon)).status_code == 200


async def test_knowledge_bases(client: httpx.AsyncClient) -> None:
    kb = await make_kb(client, "Handbook")
    r = await client.post("/api/knowledge-bases", json={"name": "handbook"})
    assert r.status_code == 409
    r = await client.get("/api/knowledge-bases")
    assert [k["name"] for k in r.json()["items"]] == ["Handbook"]
    r = await client.get(f"/api/knowledge-bases/{kb}")
    assert r.json()["settings"]["embedding_dimension"] == 384
    assert (await client.get("/api/knowledge-bases/not-a-uuid")).status_code == 422
    assert (await client.get("/api/knowledge-bases/00000000-0000-0000-0000-000000000000")).status_code == 404
    r = await client.post("/api/knowledge-bases", json={"name": "x", "settings": {"chunk_size_tokens": 64,
                                                                                 "chunk_overlap_tokens": 64}})
    assert r.status_code == 400


async def test_upload_to_ready_then_search_cites_the_source(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    md = ("# 여행 안내\n\n섬 축제는 매년 여름에 열리며 많은 관광객이 찾아온다.\n\n"
          "## Ferry\n\nThe ferry timetable changes in winter; the last boat leaves at six.\n").encode()
    r = await upload(client, kb, "guide.md", md, "application/octet-stream")
    assert r.status_code == 202, r.text
    doc = r.json()
    assert doc["status"] == "PENDING" and doc["filename"] == "guide.md" and doc["mime_type"] == "text/markdown"
    assert doc["sha256"] == hashlib.sha256(md).hexdigest() and doc["size_bytes"] == len(md)
    await process_all(container)
    r = await client.get(f"/api/documents/{doc['id']}")
    body = r.json()
    assert body["status"] == "READY" and body["attempts"] == 1 and body["parser"]["name"] == "markdown"
    assert [t["stage"] for t in body["timings"]] == ["PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "READY"]

    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "when does the last ferry leave?"})
    hit = r.json()["results"][0]
    assert hit["document_id"] == doc["id"] and hit["filename"] == "guide.md"
    assert hit["heading_path"] == ["여행 안내", "Ferry"] and hit["locator"]["line_start"] >= 5
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "섬 축제 관광객", "top_k": 1})
    assert r.json()["results"][0]["heading_path"] == ["여행 안내"]

    chunks = (await client.get(f"/api/documents/{doc['id']}/chunks")).json()["items"]
    assert [c["ordinal"] for c in chunks] == list(range(len(chunks)))
    snap = (await client.get(f"/api/documents/{doc['id']}/snapshot")).json()
    assert [c["id"] for c in snap["chunks"]] == [c["id"] for c in chunks]
    src = await client.get(f"/api/documents/{doc['id']}/source")
    assert src.content == md and "guide.md" in src.headers["content-disposition"]


async def test_upload_limits_and_bad_input(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    too_big = b"a" * (container.settings.max_upload_bytes + 1)
    r = await upload(client, kb, "big.txt", too_big)
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    r = await upload(client, kb, "picture.txt", PNG)
    assert r.status_code == 415 and "image/png" in r.json()["detail"]
    r = await upload(client, kb, "report.pdf", b"%PDF-1.7\n%binary\n")  # a PDF header and nothing readable
    assert r.status_code == 422 and "the PDF is damaged" in r.json()["detail"]
    r = await upload(client, kb, "noise.txt", bytes(range(256)) * 20)
    assert r.status_code == 415
    raw = (b'--XX\r\nContent-Disposition: form-data; name="file"; filename="bad\x07name.txt"\r\n'
           b"Content-Type: text/plain\r\n\r\nhello\r\n--XX--\r\n")
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", content=raw,
                          headers={"Content-Type": "multipart/form-data; boundary=XX"})
    assert r.status_code == 400 and "control characters" in r.json()["detail"]
    r = await upload(client, kb, "", b"hello")
    assert r.status_code in (400, 422)
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", data={"nofile": "x"})
    assert r.status_code == 400 and "field named 'file'" in r.json()["detail"]
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files=[("file", ("a.txt", b"a")), ("file", ("b.txt", b"b"))])
    assert r.status_code == 400 and "Too many files" in r.json()["detail"]
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("a.txt", b"a")},
                          data={f"f{i}": "x" for i in range(50)})
    assert r.status_code == 400 and "Too many fields" in r.json()["detail"]
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", json={"file": "x"})
    assert r.status_code == 400
    # nothing at all was stored for the refused uploads
    objects = list((container.settings.objects_dir).rglob("*"))
    assert [p for p in objects if p.is_file()] == []
    r = await client.get(f"/api/knowledge-bases/{kb}/documents")
    assert r.json()["items"] == [] and r.json()["counts"] == {}


async def test_path_traversal_filename_is_kept_as_its_basename(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    for raw in ("../../etc/passwd.txt", "..\\..\\windows\\evil.txt", "/abs/path/notes.txt"):
        r = await upload(client, kb, raw, b"some text")
        assert r.status_code == 202, r.text
        body = r.json()
        assert "/" not in body["filename"] and "\\" not in body["filename"] and ".." not in body["filename"]
        doc = await container.ingest.documents.get(body["id"])
        assert doc.object_key == f"{kb}/{body['id']}/source.txt"
    root = container.settings.objects_dir.resolve()
    assert all(root in p.resolve().parents for p in root.rglob("*") if p.is_file())


async def test_document_list_pagination_filter_and_counts(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    ids = [(await upload(client, kb, f"n{i}.txt", f"note number {i}".encode())).json()["id"] for i in range(7)]
    seen, cursor = [], None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        body = (await client.get(f"/api/knowledge-bases/{kb}/documents", params=params)).json()
        seen += [d["id"] for d in body["items"]]
        assert body["counts"] == {"PENDING": 7}
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 7
    r = await client.get(f"/api/knowledge-bases/{kb}/documents", params={"status": "READY"})
    assert r.json()["items"] == []
    assert (await client.get(f"/api/knowledge-bases/{kb}/documents", params={"status": "NOPE"})).status_code == 422
    assert (await client.get(f"/api/knowledge-bases/{kb}/documents", params={"cursor": "!!"})).status_code == 400
    assert (await client.get(f"/api/knowledge-bases/{kb}/documents", params={"limit": 10_000})).status_code == 422


async def test_reindex_is_409_while_active_and_exactly_one_of_many_wins(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    doc = (await upload(client, kb, "a.txt", b"the reindex race")).json()["id"]
    r = await client.post(f"/api/documents/{doc}/reindex")
    assert r.status_code == 409 and "active" in r.json()["detail"]
    await process_all(container)
    responses = await asyncio.gather(*(client.post(f"/api/documents/{doc}/reindex") for _ in range(50)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [202] + [409] * 49
    assert (await client.get(f"/api/documents/{doc}")).json()["status"] == "PENDING"
    await process_all(container)
    body = (await client.get(f"/api/documents/{doc}")).json()
    assert body["status"] == "READY" and body["attempts"] == 1


async def test_search_never_returns_chunks_of_documents_that_are_not_ready(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    doc = (await upload(client, kb, "a.txt", b"Dumplings are steamed in bamboo baskets.")).json()["id"]
    await process_all(container)
    query = {"query": "steamed dumplings", "top_k": 5}
    assert len((await client.post(f"/api/knowledge-bases/{kb}/search", json=query)).json()["results"]) == 1
    # a crashed worker may leave vectors and chunks behind for a document that has no published
    # revision (SPEC §4 rule 3: it never reached READY, or it was deleted or outdated)
    for status in ("PENDING", "EMBEDDING", "INDEXING", "FAILED", "DELETED", "OUTDATED"):
        await container.infra.db.execute("UPDATE documents SET status = %s, published_revision = NULL WHERE id = %s",
                                   (status, doc))
        assert await container.embedding.default_index.count_by_document(doc) > 0
        r = await client.post(f"/api/knowledge-bases/{kb}/search", json=query)
        assert r.json()["results"] == [], status
    # nor chunks of another revision than the published one, whatever the status says
    await container.infra.db.execute("UPDATE documents SET status = 'READY', published_revision = 1 WHERE id = %s", (doc,))
    assert len((await client.post(f"/api/knowledge-bases/{kb}/search", json=query)).json()["results"]) == 1
    await container.infra.db.execute("UPDATE chunks SET revision = 2 WHERE document_id = %s", (doc,))
    assert (await client.post(f"/api/knowledge-bases/{kb}/search", json=query)).json()["results"] == []


async def test_search_is_confined_to_its_knowledge_base(client: httpx.AsyncClient, container) -> None:
    a, b = await make_kb(client, "a"), await make_kb(client, "b")
    await upload(client, a, "a.txt", b"The lemon cake recipe uses three eggs.")
    await process_all(container)
    r = await client.post(f"/api/knowledge-bases/{b}/search", json={"query": "lemon cake"})
    assert r.status_code == 200 and r.json()["results"] == []


@pytest.mark.parametrize("body", [{"query": ""}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": 10_000},
                                  {"query": "x" * 5000}, {}])
async def test_search_validation(client: httpx.AsyncClient, body: dict) -> None:
    kb = await make_kb(client)
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json=body)
    assert r.status_code in (400, 422) and "detail" in r.json()


async def test_unknown_document_routes_are_404(client: httpx.AsyncClient) -> None:
    missing = "00000000-0000-0000-0000-000000000001"
    for path in ("", "/chunks", "/snapshot", "/source", f"/assets/{missing}"):
        assert (await client.get(f"/api/documents/{missing}{path}")).status_code == 404
    assert (await client.post(f"/api/documents/{missing}/reindex")).status_code == 404


async def test_scoped_keys_see_only_their_knowledge_base(client: httpx.AsyncClient, container) -> None:
    from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
    from ultimate_rag.domain.auth import Role

    a, b = await make_kb(client, "a"), await make_kb(client, "b")
    doc_b = (await upload(client, b, "b.txt", b"secret of b")).json()["id"]
    keys = ApiKeyRepository(container.infra.db)
    reader = await keys.create(is_admin=False, scopes={__import__("uuid").UUID(a): Role.READER})
    h = {"Authorization": f"Bearer {reader}"}
    assert [k["id"] for k in (await client.get("/api/knowledge-bases", headers=h)).json()["items"]] == [a]
    assert (await client.get(f"/api/knowledge-bases/{b}", headers=h)).status_code == 404
    assert (await client.get(f"/api/documents/{doc_b}", headers=h)).status_code == 404
    assert (await upload(client, a, "x.txt", b"x")).status_code == 202
    r = await client.post(f"/api/knowledge-bases/{a}/documents", files={"file": ("y.txt", b"y")}, headers=h)
    assert r.status_code == 403
    assert (await client.post("/api/knowledge-bases", json={"name": "c"}, headers=h)).status_code == 403


async def test_oversized_streamed_upload_without_content_length_is_refused(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    limit = container.settings.max_upload_bytes

    async def body():
        yield b'--XX\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
        for _ in range(limit // 65536 + 4):
            yield b"a" * 65536
        yield b"\r\n--XX--\r\n"

    r = await client.post(f"/api/knowledge-bases/{kb}/documents", content=body(),
                          headers={"Content-Type": "multipart/form-data; boundary=XX"})
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    assert not [p for p in container.settings.objects_dir.rglob("*") if p.is_file()]


async def test_metrics_token_when_configured(client: httpx.AsyncClient, container) -> None:
    container.settings.metrics_token = "scrape-me"
    assert (await client.get("/metrics", headers={"Authorization": ""})).status_code == 401
    assert (await client.get("/metrics", headers={"Authorization": "Bearer wrong"})).status_code == 401
    r = await client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert r.status_code == 200 and "ultimate_rag_documents" in r.text


async def test_security_headers_and_no_cors_by_default(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert "access-control-allow-origin" not in r.headers
    r = await client.options("/api/knowledge-bases", headers={"Origin": "https://evil.example",
                                                              "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers


async def test_json_bodies_are_small(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/knowledge-bases", content=b'{"name": "' + b"x" * 2_000_000 + b'"}',
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "request body" in r.json()["detail"]


async def test_settings_never_show_secrets(container) -> None:
    from ultimate_rag.settings import Settings

    s = Settings(admin_key="top-secret-admin", s3_secret_access_key="s3-secret", embedding_api_key="emb-secret")
    assert not any(secret in repr(s) or secret in str(s) for secret in ("top-secret-admin", "s3-secret", "emb-secret"))


async def test_control_characters_and_nul_are_refused_not_500(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/knowledge-bases", json={"name": "bad\u0000name"})
    assert r.status_code == 422 and "control characters" in r.json()["detail"]
    r = await client.post("/api/knowledge-bases", json={"name": "ok", "description": "line one\nline\u0000two"})
    assert r.status_code == 422


async def test_an_upload_and_its_audit_entry_commit_together(client: httpx.AsyncClient, container) -> None:
    """The upload's audit entry is written by the statement that creates the document: it names
    the key, the knowledge base, the document and the file; a refused upload leaves no entry."""
    from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
    from ultimate_rag.domain.auth import Role, key_prefix

    kb = await make_kb(client, "audited")
    writer = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={__import__("uuid").UUID(kb): Role.EDITOR})
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("notes.txt", b"audited words")},
                          headers={"Authorization": f"Bearer {writer}"})
    assert r.status_code == 202, r.text
    doc = r.json()
    [entry] = [e for e in (await client.get("/api/audit")).json()["items"] if e["action"] == "document.upload"]
    assert entry["key_prefix"] == key_prefix(writer) and entry["knowledge_base_id"] == kb
    assert entry["document_id"] == doc["id"]
    assert entry["detail"] == {"filename": "notes.txt", "size_bytes": "13",
                               "sha256": hashlib.sha256(b"audited words").hexdigest()}

    await container.infra.db.execute("UPDATE knowledge_bases SET deleting = true WHERE id = %s", (kb,))
    assert (await upload(client, kb, "late.txt", b"too late")).status_code == 409
    uploads = [e for e in (await client.get("/api/audit")).json()["items"] if e["action"] == "document.upload"]
    assert [e["document_id"] for e in uploads] == [doc["id"]]

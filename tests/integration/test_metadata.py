"""Document metadata through the HTTP API (SPEC §10, §11; docs/metadata.md): set at upload, filled
from Markdown front matter and the upload's folder path, changed with PATCH without a rebuild and
seen by the next search, on the document, its chunks, search hits and answer citations; filters
inside the vector query; every bad input a 422 naming the field; editors write, readers read."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import httpx
import pytest

from ultimate_rag.services.job_loop import WorkerConfig

HANDBOOK = (b"---\ntitle: Staff handbook\nauthor: Dana Kim\ndate: 2024-03-01\ntags: [hr, policy]\n---\n"
            b"# Holidays\n\nEvery employee has thirty days of paid holiday a year; carry-over ends in March.\n")
CONTRACT = b"The supplier delivers the toner cartridges within ten days of each order; payment is due in thirty."
MANUAL = b"To reset the printer, hold the power button for ten seconds until the light blinks twice."


async def upload(client: httpx.AsyncClient, kb: str, name: str, data: bytes, metadata: object = None,
                 path: str | None = None) -> httpx.Response:
    form: dict[str, str] = {}
    if metadata is not None:
        form["metadata"] = metadata if isinstance(metadata, str) else json.dumps(metadata)
    if path is not None:
        form["path"] = path
    return await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data)}, data=form)


async def hits(client: httpx.AsyncClient, kb: str, query: str, metadata: object, **body: object) -> list[dict]:
    r = await client.post(f"/api/knowledge-bases/{kb}/search",
                          json={"query": query, "top_k": 10, "filters": {"metadata": metadata}, **body})
    assert r.status_code == 200, r.text
    return r.json()["results"]


@pytest.fixture
async def corpus(client: httpx.AsyncClient, container) -> tuple[str, dict[str, str]]:
    kb = (await client.post("/api/knowledge-bases", json={"name": f"kb-{uuid4().hex[:6]}"})).json()["id"]
    ids = {}
    for name, data, meta, path in [
            ("handbook.md", HANDBOOK, {"office": "Berlin", "year": 2025}, "hr/policies/handbook.md"),
            ("contract.txt", CONTRACT, {"office": "Berlin", "year": 2024, "kind": "contract",
                                        "signed": "2024-06-30", "parties": ["ACME", "Globex"]}, None),
            ("manual.txt", MANUAL, {"office": "Seoul", "year": 2025, "version": 3}, None)]:
        r = await upload(client, kb, name, data, meta, path)
        assert r.status_code == 202, r.text
        ids[name] = r.json()["id"]
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    return kb, ids


async def test_metadata_on_the_document_its_chunks_and_hits(client: httpx.AsyncClient, corpus) -> None:
    kb, ids = corpus
    doc = (await client.get(f"/api/documents/{ids['handbook.md']}")).json()
    assert doc["status"] == "READY"
    meta = doc["metadata"]
    assert meta["office"] == "Berlin" and meta["year"] == 2025
    assert meta["doc"] == {"title": "Staff handbook", "author": "Dana Kim", "created": "2024-03-01"}
    assert meta["front_matter"]["tags"] == ["hr", "policy"]
    assert meta["source"] == {"path": "hr/policies/handbook.md", "folder": "hr/policies",
                              "folders": ["hr", "hr/policies"]}
    assert doc["source"] == {"kind": "upload", "path": "hr/policies/handbook.md"}
    chunks = (await client.get(f"/api/documents/{ids['handbook.md']}/chunks")).json()["items"]
    assert chunks and all(c["document_metadata"] == meta for c in chunks)
    found = await hits(client, kb, "paid holiday", {"front_matter.tags": {"$contains": "hr"}})
    assert {h["filename"] for h in found} == {"handbook.md"} and found[0]["metadata"] == meta
    answer = (await client.post(f"/api/knowledge-bases/{kb}/answer", json={
        "question": "How many days of paid holiday?", "filters": {"metadata": {"office": "Berlin"}}})).json()
    assert answer["citations"] and answer["citations"][0]["metadata"]["office"] == "Berlin"


FILTER_CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"office": "Berlin"}, {"handbook.md", "contract.txt"}),
    ({"office": {"$ne": "Berlin"}}, {"manual.txt"}),
    ({"office": "Berlin", "year": {"$gte": 2025}}, {"handbook.md"}),
    ({"year": {"$in": [2024]}}, {"contract.txt"}),
    ({"kind": {"$nin": ["contract"]}}, {"handbook.md", "manual.txt"}),
    ({"signed": {"$gt": "2024-06-01", "$lte": "2024-06-30T23:59:59+02:00"}}, {"contract.txt"}),
    ({"parties": {"$contains": "Globex"}}, {"contract.txt"}),
    ({"version": {"$exists": True}}, {"manual.txt"}),
    ({"version": {"$exists": False}, "doc.author": {"$exists": False}}, {"contract.txt"}),
    ({"$or": [{"version": 3}, {"doc.author": "Dana Kim"}]}, {"manual.txt", "handbook.md"}),
    ({"$and": [{"year": 2025}, {"$or": [{"office": "Seoul"}, {"source.folders": {"$contains": "hr"}}]}]},
     {"manual.txt", "handbook.md"}),
    ({"year": "2025"}, set()),  # typed: the string is not the number
]


async def test_metadata_filters_inside_the_search(client: httpx.AsyncClient, corpus) -> None:
    """Every operator, in every mode, on one corpus (ingested once: the cases share it)."""
    kb, _ = corpus
    for metadata, expected in FILTER_CASES:
        for mode in ("hybrid", "dense", "sparse"):
            found = await hits(client, kb, "printer toner holiday", metadata, mode=mode, group_by_document=True)
            assert {h["filename"] for h in found} == expected, (metadata, mode)


async def test_a_patch_is_searchable_at_once_and_rebuilds_nothing(client: httpx.AsyncClient, container,
                                                                  corpus) -> None:
    kb, ids = corpus
    doc_id = ids["manual.txt"]
    before = (await client.get(f"/api/documents/{doc_id}")).json()
    chunk_ids = {c["id"] for c in (await client.get(f"/api/documents/{doc_id}/chunks")).json()["items"]}
    vectors = await container.infra.db.fetchone(
        "SELECT count(*) AS n, max(xmin::text) AS x FROM chunk_vectors_384 WHERE document_id = %s", (doc_id,))
    r = await client.patch(f"/api/documents/{doc_id}", json={"metadata": {"office": "Berlin", "version": None,
                                                                          "review": {"by": "Lee"}}})
    assert r.status_code == 200, r.text
    after = r.json()
    assert after["metadata"]["office"] == "Berlin" and "version" not in after["metadata"]
    assert after["metadata"]["review"] == {"by": "Lee"} and after["metadata"]["year"] == 2025
    assert after["status"] == "READY" and after["searchable"]
    assert after["published_revision"] == before["published_revision"]
    assert after["content_revision"] == before["content_revision"]
    assert {c["id"] for c in (await client.get(f"/api/documents/{doc_id}/chunks")).json()["items"]} == chunk_ids
    assert await container.infra.db.fetchone(
        "SELECT count(*) AS n, max(xmin::text) AS x FROM chunk_vectors_384 WHERE document_id = %s",
        (doc_id,)) == vectors  # the same rows, never rewritten
    found = await hits(client, kb, "reset the printer", {"office": "Berlin", "review.by": "Lee"})
    assert [h["filename"] for h in found] == ["manual.txt"] and found[0]["metadata"]["office"] == "Berlin"
    assert await hits(client, kb, "reset the printer", {"office": "Seoul"}) == []
    merged = (await client.patch(f"/api/documents/{doc_id}", json={"metadata": {"review": {"at": "2025-01-02"}}}))
    assert merged.json()["metadata"]["review"] == {"by": "Lee", "at": "2025-01-02"}  # objects merge


@pytest.mark.parametrize(("metadata", "field"), [
    ("not json", "metadata"),
    ([1, 2], "metadata"),
    ({"bad key": 1}, "metadata"),
    ({"a.b": 1}, "metadata"),
    ({"doc": {"title": "x"}}, "metadata.doc"),
    ({"n": None}, "metadata.n"),
    ({"tags": ["ok", 3]}, "metadata.tags[1]"),
    ({"deep": {"a": {"b": {"c": 1}}}}, "metadata.deep.a.b"),
    ({"s": "x" * 3000}, "metadata.s"),
    ({f"k{i}": i for i in range(65)}, "metadata"),
])
async def test_bad_metadata_is_a_422_naming_the_field(client: httpx.AsyncClient, metadata, field) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": f"v-{uuid4().hex[:6]}"})).json()["id"]
    r = await upload(client, kb, "a.txt", b"hello there", metadata)
    assert r.status_code == 422 and r.json()["detail"].startswith(field), r.text


async def test_bad_patches_and_filters_are_422(client: httpx.AsyncClient, corpus) -> None:
    kb, ids = corpus
    doc = f"/api/documents/{ids['manual.txt']}"
    bodies: list[dict[str, Any]] = [{"metadata": {"source": {"path": "x"}}}, {"metadata": {"x": [{"a": 1}]}},
                                    {"metadata": []}, {"metadata": {}, "filename": "x"}, {}]
    for body in bodies:
        r = await client.patch(doc, json=body)
        assert r.status_code == 422, (body, r.text)
    for metadata, words in [({"year": {"$gt": "soon"}}, "filters.metadata.year.$gt"),
                            ({"year": {"$regex": "2"}}, "unknown operator"),
                            ({"tags": {"$contains": 3}}, "filters.metadata.tags.$contains"),
                            ({"year": {"$in": 2025}}, "filters.metadata.year.$in"),
                            ({"version": {"$exists": "yes"}}, "$exists"),
                            ({"$or": {"a": 1}}, "filters.metadata.$or"),
                            ({"$nor": [{"a": 1}]}, "filters.metadata.$nor"),
                            ({}, "filters.metadata"),
                            ({"a..b": 1}, "invalid field")]:
        r = await client.post(f"/api/knowledge-bases/{kb}/search",
                              json={"query": "x", "filters": {"metadata": metadata}})
        assert r.status_code == 422 and words in r.json()["detail"], (metadata, r.text)


async def test_editors_change_metadata_readers_read_it(client: httpx.AsyncClient, corpus) -> None:
    kb, ids = corpus
    other = (await client.post("/api/knowledge-bases", json={"name": f"o-{uuid4().hex[:6]}"})).json()["id"]
    keys = {}
    for role, scope in (("reader", kb), ("editor", kb), ("stranger", other)):
        r = await client.post("/api/keys", json={"scopes": [
            {"knowledge_base_id": scope, "role": "editor" if role == "editor" else "reader"}]})
        assert r.status_code == 201, r.text
        keys[role] = {"Authorization": f"Bearer {r.json()['key']}"}
    doc = f"/api/documents/{ids['contract.txt']}"
    assert (await client.get(doc, headers=keys["reader"])).json()["metadata"]["kind"] == "contract"
    assert (await client.patch(doc, json={"metadata": {"kind": "x"}}, headers=keys["reader"])).status_code == 403
    assert (await client.patch(doc, json={"metadata": {"kind": "x"}}, headers=keys["stranger"])).status_code == 404
    r = await client.patch(doc, json={"metadata": {"kind": "lease"}}, headers=keys["editor"])
    assert r.status_code == 200 and r.json()["metadata"]["kind"] == "lease"


async def test_the_folder_path_is_relative_and_checked(client: httpx.AsyncClient) -> None:
    """``path`` becomes ``source.path`` (the one place a document's folder path lives) as a clean
    relative path; what could climb out of the folder or hide characters is a 422 naming it."""
    kb = (await client.post("/api/knowledge-bases", json={"name": f"p-{uuid4().hex[:6]}"})).json()["id"]
    r = await upload(client, kb, "a.md", b"# A\n\ntext\n", path="/hr/./policies\\a.md")
    assert r.status_code == 202, r.text
    doc = (await client.get(f"/api/documents/{r.json()['id']}")).json()
    assert doc["metadata"]["source"] == {"path": "hr/policies/a.md", "folder": "hr/policies",
                                         "folders": ["hr", "hr/policies"]}
    assert doc["source"]["path"] == "hr/policies/a.md"
    for path in ("../etc/a.md", "hr/../../a.md", "hr/\u202ea.md", "a/" * 600 + "a.md"):
        r = await upload(client, kb, "b.md", b"# B\n\ntext\n", path=path)
        assert r.status_code == 422 and r.json()["detail"].startswith("path"), (path, r.text)

"""Search through the HTTP API (SPEC §10): modes, filters applied inside the vector query, 422s,
min_score, group_by_document, page ranges and highlights — on pgvector and on Milvus Lite (a real
``milvus-lite`` server; the sparse side stays in PostgreSQL there). SPEC §4: a document that is not
READY is never returned, in any mode, with any filter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import httpx
import pymupdf
import pytest

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing import fixtures as servers

from ..conftest import ADMIN_KEY

milvus_server = servers.milvus_server
backend = servers.vector_backend
MODES = ("hybrid", "dense", "sparse")

DOCS: dict[str, tuple[bytes, str]] = {
    "manual.md": (b"# Printer manual\n\n## Error codes\n\nError E-4821 means the toner cartridge is not seated; "
                  b"open the front cover and push it in until it clicks.\n\n## Paper\n\n"
                  b"Load at most two hundred sheets of A4 paper in the lower tray.\n", "text/markdown"),
    "tickets.txt": (b"Ticket TK-20931: the badge reader at the north entrance rejects every card after a "
                    b"power cut; facilities replaced the controller board.", "text/plain"),
    "seoul.txt": ("서울 지하철 2호선은 도심을 한 바퀴 도는 순환선이며 하루 이용객이 가장 많다.".encode(), "text/plain"),
    "beijing.txt": ("北京是中华人民共和国的首都，也是全国的政治和文化中心。".encode(), "text/plain"),
}


def three_page_pdf() -> bytes:
    """One short paragraph per page: a single chunk that spans pages 1 to 3."""
    doc = pymupdf.open()
    for text in ("The warranty covers the pump for five years.", "Clause 7.3 excludes damage from frost.",
                 "Claims go to the regional service desk."):
        doc.new_page().insert_text((72, 72), text, fontsize=11)
    return doc.tobytes()




@pytest.fixture
def settings(db_url: str, tmp_path: Path, backend: dict[str, str]) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
                    retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=1_000_000,
                    **backend)  # type: ignore[arg-type]  # the backend fixture: settings fields by name


async def search(client: httpx.AsyncClient, kb: str, **body: object) -> list[dict]:
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json=body)
    assert r.status_code == 200, r.text
    return r.json()["results"]


@pytest.fixture
async def corpus(client: httpx.AsyncClient, container) -> tuple[str, dict[str, str]]:
    kb = (await client.post("/api/knowledge-bases", json={"name": f"kb-{uuid4().hex[:6]}"})).json()["id"]
    files = {**DOCS, "warranty.pdf": (three_page_pdf(), "application/pdf")}
    ids = {}
    for name, (data, ctype) in files.items():
        r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data, ctype)})
        assert r.status_code == 202, r.text
        ids[name] = r.json()["id"]
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    for doc_id in ids.values():
        assert (await client.get(f"/api/documents/{doc_id}")).json()["status"] == "READY"
    return kb, ids


async def test_modes_filters_and_citations(client: httpx.AsyncClient, container, corpus) -> None:
    kb, ids = corpus
    name_of = {v: k for k, v in ids.items()}
    # every mode finds an exact identifier, and highlights it
    for mode in MODES:
        hits = await search(client, kb, query="E-4821", mode=mode, top_k=3)
        assert hits and hits[0]["filename"] == "manual.md", (mode, hits)
        content = hits[0]["content"]
        assert "E-4821" in [content[a:b] for a, b in hits[0]["highlights"]]
        assert hits[0]["heading_path"] == ["Printer manual", "Error codes"]
    # the default is hybrid; cross-language questions find their document
    assert (await search(client, kb, query="Which subway line in Seoul is circular?", top_k=1))[0]["filename"] == "seoul.txt"
    hit = (await search(client, kb, query="首都", top_k=1))[0]
    assert hit["filename"] == "beijing.txt" and [hit["content"][a:b] for a, b in hit["highlights"]] == ["首都"]
    # a chunk across pages cites the range
    hit = (await search(client, kb, query="Does the warranty cover frost damage?", top_k=1))[0]
    assert hit["filename"] == "warranty.pdf"
    assert hit["locator"]["page_start"] == 1 and hit["locator"]["page_end"] == 3 and "page" not in hit["locator"]

    filters: list[tuple[dict, set[str]]] = [
        ({"filename": "*.txt"}, {"tickets.txt", "seoul.txt", "beijing.txt"}),
        ({"filename": "[ms]*"}, {"manual.md", "seoul.txt"}),
        ({"mime_types": ["application/pdf"]}, {"warranty.pdf"}),
        ({"document_ids": [ids["tickets.txt"], ids["beijing.txt"]]}, {"tickets.txt", "beijing.txt"}),
        ({"heading": "error CODES"}, {"manual.md"}),
        ({"created_after": (datetime.now(UTC) - timedelta(hours=1)).isoformat(), "filename": "*.md"}, {"manual.md"}),
        ({"created_after": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}, set()),
        ({"updated_before": "2001-01-01T00:00:00Z"}, set()),
        ({"connector_id": str(uuid4())}, set()),
    ]
    for flt, allowed in filters:
        for mode in MODES:
            for query in ("E-4821 toner error", "badge reader ticket", "subway", "warranty claims"):
                hits = await search(client, kb, query=query, mode=mode, filters=flt, top_k=10)
                got = {h["filename"] for h in hits}
                assert got <= allowed, (flt, mode, query, got)
                if mode == "dense":  # dense similarity is never zero: every allowed chunk comes back
                    assert {name_of[h["document_id"]] for h in hits} == allowed, (flt, query)
    heading_hits = await search(client, kb, query="paper tray", filters={"heading": "Error codes"}, mode="dense")
    assert all("Error codes" in h["heading_path"] for h in heading_hits) and heading_hits

    # min_score and group_by_document
    everything = await search(client, kb, query="printer toner error", top_k=10)
    assert len(everything) >= 5
    threshold = everything[2]["score"]
    above = await search(client, kb, query="printer toner error", top_k=10, min_score=threshold)
    assert 1 <= len(above) <= 3 and all(h["score"] >= threshold for h in above)
    grouped = await search(client, kb, query="printer toner error", top_k=10, group_by_document=True)
    assert len({h["document_id"] for h in grouped}) == len(grouped) == len(ids)
    assert grouped[0]["chunk_id"] == everything[0]["chunk_id"]  # a document ranks by its best chunk

    # SPEC §4 rule 3: no published revision (never READY, deleted, outdated), never returned — in every
    # mode, with every filter, whatever vectors and chunks a crashed worker left
    for status in ("PENDING", "EMBEDDING", "FAILED", "DELETED", "OUTDATED"):
        await container.infra.db.execute("UPDATE documents SET status = %s, published_revision = NULL WHERE id = %s",
                                   (status, ids["manual.md"]))
        for mode in MODES:
            for flt in ({}, {"filename": "*.md"}, {"heading": "Error"}, {"document_ids": [ids["manual.md"]]}):
                hits = await search(client, kb, query="E-4821", mode=mode, filters=flt)
                assert ids["manual.md"] not in {h["document_id"] for h in hits}, (status, mode, flt)

    metrics = (await client.get("/metrics")).text
    for mode in MODES:
        assert f'ultimate_rag_search_duration_seconds_count{{mode="{mode}"}}' in metrics


async def test_a_selective_filter_still_fills_top_k(client: httpx.AsyncClient, container) -> None:
    """The few documents a filter keeps rank far below the others: the search must not stop at the
    first candidates and return fewer than top_k."""
    kb = (await client.post("/api/knowledge-bases", json={"name": "many"})).json()["id"]
    for i in range(14):
        text = f"Invoice {i}: the toner order number {1000 + i} for the printers on floor {i % 5} was paid."
        await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (f"invoice-{i}.txt", text.encode())})
    for i in range(3):
        text = f"Recipe {i}: bake the apple pie for forty minutes and let it cool on a rack."
        await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (f"recipe-{i}.md", text.encode())})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    for mode in ("hybrid", "dense"):
        hits = await search(client, kb, query="toner order for the printers", mode=mode, top_k=3,
                            filters={"filename": "recipe-*"})
        assert sorted(h["filename"] for h in hits) == ["recipe-0.md", "recipe-1.md", "recipe-2.md"], mode


@pytest.mark.parametrize("body", [
    {"query": "x", "filters": {"file_name": "*.pdf"}},
    {"query": "x", "filters": {"created_after": "yesterday"}},
    {"query": "x", "filters": {"document_ids": ["not-a-uuid"]}},
    {"query": "x", "filters": {"document_ids": []}},
    {"query": "x", "filters": {"mime_types": "application/pdf"}},
    {"query": "x", "filters": {"mime_types": ["pdf"]}},
    {"query": "x", "filters": {"connector_id": 7}},
    {"query": "x", "filters": {"heading": ""}},
    {"query": "x", "filters": "*.pdf"},
    {"query": "x", "mode": "fuzzy"},
    {"query": "x", "min_score": 2},
    {"query": "x", "group_by_document": "maybe"},
    {"query": "x", "unknown": 1},
])
async def test_bad_search_requests_are_422(client: httpx.AsyncClient, body: dict, backend) -> None:
    if backend["vector_store"] != "pgvector":
        pytest.skip("validation does not depend on the vector store")
    kb = (await client.post("/api/knowledge-bases", json={"name": "v"})).json()["id"]
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json=body)
    assert r.status_code == 422 and "detail" in r.json(), r.text

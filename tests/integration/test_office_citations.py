"""DOCX, HTML and their tables through the API and the worker (real PostgreSQL, the real model):
a number in a table is found with its column's name in the hit and cited with the table, its row
and its paragraphs; every chunk of a DOCX and an HTML page cites its paragraphs in the snapshot,
and an HTML chunk its anchor in the answer's citations; a file that is empty, damaged or in an
encoding we do not read is refused at upload with what is wrong."""

from __future__ import annotations

import json

from tests.corpus.tables import REGIONS, docx_file

from .test_documents_formats import document, make_kb, run_worker, upload

PAGE = (b"<html><head><title>Ferry guide</title></head><body><h1 id='guide'>Ferry guide</h1>"
        b"<p>The harbour runs four ferries to the islands every day of the year.</p>"
        b"<section id='night'><h2>Night service</h2><p>The last lighthouse ferry leaves the north pier at midnight "
        b"and calls at every island on its way back.</p></section></body></html>")


async def snapshot_chunks(client, doc_id: str) -> list[dict]:
    return json.loads((await client.get(f"/api/documents/{doc_id}/snapshot")).content)["chunks"]


async def test_tables_and_paragraphs_are_cited_where_they_are(client, container) -> None:
    kb = await make_kb(client)
    report = (await upload(client, kb, "report.docx", docx_file())).json()["id"]
    page = (await upload(client, kb, "guide.html", PAGE)).json()["id"]
    await run_worker(container)
    assert (await document(client, report))["status"] == "READY"
    assert (await document(client, page))["status"] == "READY"

    row = next(r for r in REGIONS.body if r[0] == "Islands")
    r = await client.post(f"/api/knowledge-bases/{kb}/search",
                          json={"query": f"Islands {row[1]} revenue 2025", "top_k": 10})
    hit = next(h for h in r.json()["results"] if row[3] in h["content"])
    assert "| Region | Segment | Revenue / 2024 | Revenue / 2025 |" in hit["content"]
    loc = hit["locator"]
    assert loc["table"] == 1 and loc["row_start"] <= 13 <= loc["row_end"] and loc["paragraph_start"] > 0

    for doc_id in (report, page):
        chunks = await snapshot_chunks(client, doc_id)
        assert chunks and all(c["locator"].get("paragraph_start") for c in chunks), chunks

    r = await client.post(f"/api/knowledge-bases/{kb}/answer",
                          json={"question": "When does the last lighthouse ferry leave?", "top_k": 3})
    assert r.status_code == 200, r.text
    cited = [c for c in r.json()["citations"] if c["filename"] == "guide.html"]
    assert cited and cited[0]["locator"]["anchor"] in ("night", "guide"), cited


async def test_empty_damaged_and_unreadable_files_are_refused_saying_why(client) -> None:
    kb = await make_kb(client)
    empty = await upload(client, kb, "scan.pdf", b"")
    assert empty.status_code == 422 and empty.json()["detail"] == "the file is empty (0 bytes): there is no PDF to read"
    damaged = await upload(client, kb, "report.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 8)
    assert damaged.status_code == 422 and "the PDF is damaged" in damaged.json()["detail"]
    taiwanese = await upload(client, kb, "notes.txt", (b"\x8e\xa2\xc4\xa1\xc4\xe3 abc " * 200))
    assert taiwanese.status_code == 415 and "EUC-TW" in taiwanese.json()["detail"]
    assert ".txt" in taiwanese.json()["supported_formats"]
    wide = await upload(client, kb, "notes.txt", "Ferry times, winter timetable.\n".encode("utf-16-le") * 20)
    assert wide.status_code == 202, wide.text

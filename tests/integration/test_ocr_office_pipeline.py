"""Scans and office files through the API and the worker (isolated parsing with its limits, real
PostgreSQL, the real model): a phrase that exists only in a scanned image (English and Chinese
PDFs, a PNG) is found by search with its page, box and page image; the progress shows pages done
while PARSING with an estimate of the time left; a slide's speaker note is cited with its slide number; an XLSX cell with its sheet
and row; hostile packages fail with a reason and lying extensions are refused with the formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from ultimate_rag.settings import Settings

from ..conftest import ADMIN_KEY
from ..unit.office_builders import image_bytes, make_pptx, make_xlsx, package, scan_image, scan_pdf
from .test_documents_formats import document, make_kb, run_worker, upload

ENGLISH_ONLY_IN_IMAGE = "The walrus committee approved invoice 5521"
CHINESE_ONLY_IN_IMAGE = "蓝色鲸鱼在午夜签署了合同"
PNG_ONLY_IN_IMAGE = "Heron count at dawn was ninety seven"


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=60,
                    retry_delay_seconds=0.05, poll_interval_seconds=0.2, parse_timeout_seconds=240,
                    parse_max_archive_bytes=8 * 1024 * 1024)


def record_progress(container) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    queue = container.ingest.processor._store
    real = queue.report_progress

    async def spy(lease, progress):
        seen.append(dict(progress))
        await real(lease, progress)

    queue.report_progress = spy
    return seen


async def small_chunk_kb(client: httpx.AsyncClient) -> str:
    """Chunks of at most 32 tokens: a page's text is a chunk of its own, citing that page."""
    r = await client.post("/api/knowledge-bases", json={"name": "scans", "settings": {"chunk_size_tokens": 32,
                                                                                       "chunk_overlap_tokens": 0}})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def search(client: httpx.AsyncClient, kb: str, query: str) -> list[dict[str, Any]]:
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": query, "top_k": 5})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def compact(text: str) -> str:
    return "".join(text.split()).lower()


async def test_scans_are_found_by_text_that_exists_only_in_their_images(client, container) -> None:
    progress = record_progress(container)
    kb = await small_chunk_kb(client)
    english = (await upload(client, kb, "invoice-scan.pdf",
                            scan_pdf([["Walrus Holdings Ltd"], [ENGLISH_ONLY_IN_IMAGE, "on the ninth of May"]]))).json()
    chinese = (await upload(client, kb, "contract-scan.pdf", scan_pdf([[CHINESE_ONLY_IN_IMAGE, "第二条 付款方式"]]))).json()
    photo = (await upload(client, kb, "count.png", image_bytes(scan_image([PNG_ONLY_IN_IMAGE], size=(1200, 300),
                                                                          top=60), "PNG"))).json()
    await run_worker(container)

    doc = await document(client, english["id"])
    assert doc["status"] == "READY", doc
    assert doc["parser"]["name"] == "pdf"
    assert doc["warnings"] == ["pages 1–2 of 2: no text layer (scanned images); their text was read by OCR"]
    hit = next(h for h in await search(client, kb, "walrus committee invoice 5521")
               if compact(ENGLISH_ONLY_IN_IMAGE) in compact(h["content"]))
    assert hit["filename"] == "invoice-scan.pdf" and hit["locator"]["page"] == 2
    x0, y0, x1, y1 = hit["locator"]["bbox"]
    assert 0 <= x0 < x1 <= 612 and 0 <= y0 < y1 <= 792
    assert [a["page"] for a in hit["assets"]] == [2]
    served = await client.get(hit["assets"][0]["url"])
    assert served.status_code == 200 and served.headers["content-type"] == "image/jpeg"

    assert (await document(client, chinese["id"]))["status"] == "READY"
    hit = next(h for h in await search(client, kb, "蓝色鲸鱼签署合同")
               if CHINESE_ONLY_IN_IMAGE in compact(h["content"]))
    assert hit["filename"] == "contract-scan.pdf" and hit["locator"]["page"] == 1

    assert (await document(client, photo["id"]))["parser"]["name"] == "image"
    hit = next(h for h in await search(client, kb, "heron count at dawn") if "ninety" in h["content"].lower())
    assert hit["filename"] == "count.png" and hit["locator"]["page"] == 1 and hit["assets"]

    parsing = [p for p in progress if p.get("stage") == "PARSING"]
    assert {"stage": "PARSING", "done": 2, "total": 2} in parsing  # the two-page scan, every page done
    halfway = [p for p in parsing if p["done"] == 1 and p["total"] == 2]
    assert halfway and all(p["eta_seconds"] >= 0 for p in halfway)  # the page left, at the first page's pace


async def test_a_speaker_note_is_cited_with_its_slide_and_a_cell_with_its_sheet_and_row(client, container) -> None:
    kb = await make_kb(client)
    deck = make_pptx([{"title": "Welcome", "body": ["Agenda for the harbour board"]},
                      {"title": "Budget", "body": ["Numbers for 2026"],
                       "notes": "Remind the board that the lighthouse lens costs 48,000 euros"}])
    book = make_xlsx({"Summary": [["Area", "Total"], ["Harbour", 10]],
                      "Inventory": [["Item", "Shelf", "Count"], ["Rope", "A1", 12], ["Signal flares", "C7", 40],
                                    ["Foghorn membranes", "Z9", 3]]})
    pptx_id = (await upload(client, kb, "board.pptx", deck)).json()["id"]
    xlsx_id = (await upload(client, kb, "stock.xlsx", book)).json()["id"]
    await run_worker(container)
    assert (await document(client, pptx_id))["status"] == "READY"
    assert (await document(client, xlsx_id))["status"] == "READY"

    hit = next(h for h in await search(client, kb, "lighthouse lens cost") if "48,000" in h["content"])
    assert hit["filename"] == "board.pptx" and hit["locator"]["page"] == 2 and hit["heading_path"] == ["Budget"]
    assert "Speaker notes: Remind the board" in hit["content"]

    hit = next(h for h in await search(client, kb, "foghorn membranes shelf") if "Foghorn membranes" in h["content"])
    assert hit["filename"] == "stock.xlsx" and hit["heading_path"] == ["Inventory"]
    assert hit["locator"]["row_start"] <= 4 <= hit["locator"]["row_end"]  # sheet row 4 holds the cell
    assert "| Item | Shelf | Count |" in hit["content"]


async def test_hostile_office_files_fail_readably_and_lying_names_are_refused(client, container) -> None:
    kb = await make_kb(client)
    bomb = package({"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<workbook/>",
                    "xl/worksheets/sheet1.xml": b"\0" * (20 * 1024 * 1024)})
    assert len(bomb) < 100_000
    failed = (await upload(client, kb, "bomb.xlsx", bomb)).json()
    fine = (await upload(client, kb, "fine.xlsx", make_xlsx({"S": [["k"], ["v"]]}))).json()
    refused = await upload(client, kb, "deck.xlsx", make_pptx([{"title": "x"}]))
    assert refused.status_code == 415
    assert ".pptx" in refused.json()["supported_formats"] and ".epub" in refused.json()["supported_formats"]
    await run_worker(container)
    doc = await document(client, failed["id"])
    assert doc["status"] == "FAILED" and "zip bomb" in doc["error_message"] and doc["attempts"] == 1
    assert (await document(client, fine["id"]))["status"] == "READY"

"""PDF text defects through the API and the worker (isolated parsing, real PostgreSQL, the real
model): a NUL in extracted text no longer fails indexing, unreadable pages are left out with a
warning on the document, a wholly unreadable PDF fails with a reason, a page tree MuPDF cannot
read is indexed through pypdf, and an unsupported file is answered 415 with the formats there are."""

from __future__ import annotations

import re

from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.text_quality import UNREADABLE_REASON

from ..unit.pdf_builders import READABLE, make_pdf_with_controls, unreadable_pdf, zero_count_pdf
from ..unit.test_detect import xps_package
from .test_documents_formats import chunks, document, make_kb, run_worker, settings, upload

__all__ = ["settings"]  # the formats suite's settings fixture (isolated parsing, room for large files)
_CONTROLS = {chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"} | {"\x7f"}


async def test_nul_and_control_characters_in_pdf_text_reach_ready_clean(client, container) -> None:
    kb = await make_kb(client)
    r = await upload(client, kb, "controls.pdf", make_pdf_with_controls())
    assert r.status_code == 202, r.text
    await run_worker(container)
    doc = await document(client, r.json()["id"])
    assert doc["status"] == "READY", doc
    assert doc["parser"] == {"name": "pdf", "version": PdfParser.version} and doc["warnings"] == []
    joined = "\n".join(c["content"] + "".join(c["heading_path"]) for c in await chunks(client, doc["id"]))
    assert "ferry leaves every twenty minutes from pier four and returns at noon" in joined
    assert "tickets are sold on board and at the kiosk by the gate." in joined
    assert not _CONTROLS & set(joined)


async def test_unreadable_pages_are_not_indexed_and_the_document_says_so(client, container) -> None:
    kb = await make_kb(client)
    partly = (await upload(client, kb, "partly.pdf", unreadable_pdf(readable_pages=2, unreadable_pages=3))).json()
    wholly = (await upload(client, kb, "wholly.pdf", unreadable_pdf(readable_pages=0, unreadable_pages=2))).json()
    await run_worker(container)

    doc = await document(client, partly["id"])
    assert doc["status"] == "READY", doc
    assert doc["warnings"] == ["pages 3–5 of 5: the text layer cannot be read (its fonts have no Unicode map) "
                               "and was not indexed; those pages need OCR"]
    assert "warnings" not in doc["progress"]
    items = await chunks(client, doc["id"])
    assert {c["locator"].get("page") for c in items} <= {1, 2, None}  # None: a chunk across pages 1 and 2
    joined = "\n".join(c["content"] for c in items)
    assert f"Page 1: {READABLE}" in joined and f"Page 2: {READABLE}" in joined
    assert not _CONTROLS & set(joined)
    listed = (await client.get(f"/api/knowledge-bases/{kb}/documents")).json()["items"]
    assert next(d for d in listed if d["id"] == doc["id"])["warnings"] == doc["warnings"]

    failed = await document(client, wholly["id"])
    assert failed["status"] == "FAILED" and failed["error_message"] == UNREADABLE_REASON
    assert failed["attempts"] == 1 and failed["warnings"] == []


async def test_a_pdf_whose_page_tree_is_missing_is_indexed_from_its_page_objects(client, container) -> None:
    """py-pdf's unreadablemetadata.pdf: the catalog names a /Pages object the file does not hold."""
    kb = await make_kb(client)
    data, texts = zero_count_pdf()
    data = re.sub(rb"/Pages (\d+) 0 R", b"/Pages 999 0 R", data, count=1)
    r = await upload(client, kb, "linearized.pdf", data)
    await run_worker(container)
    doc = await document(client, r.json()["id"])
    assert doc["status"] == "READY", doc
    assert "page tree is damaged" in doc["warnings"][0]
    joined = "\n".join(c["content"] for c in await chunks(client, doc["id"]))
    assert all(text in joined for text in texts)


async def test_unsupported_formats_are_answered_with_the_supported_ones(client) -> None:
    kb = await make_kb(client)
    r = await upload(client, kb, "printout.xps", xps_package())
    assert r.status_code == 415, r.text
    body = r.json()
    assert "application/vnd.ms-xpsdocument" in body["detail"] and "application/zip" not in body["detail"]
    supported = list(default_registry().supported_extensions)
    assert body["supported_formats"] == supported and {".pdf", ".docx", ".md"} <= set(supported)
    assert body["detail"].endswith("supported formats: " + ", ".join(supported))
    r = await upload(client, kb, "slides.odp", b"plain words in a file with an unknown extension")
    assert r.status_code == 415 and r.json()["supported_formats"] == supported

"""Deduplication compares what a document says and shows, not what the service writes for it:
unrelated image-only PDFs (whose only text is our own ``[Image on page 1]`` placeholder) and
near-empty documents ("TEST" in a DOCX, "Test" in an HTML page) are never merged; the same text with
different images is not identical; the same text with the same image still is."""

from __future__ import annotations

import io

import pymupdf

from ..unit.test_format_parsers import png
from .test_api import make_kb, upload
from .test_dedup import doc, run

TEXT = "\n\n".join(f"Pier {i}: the harbour ferry leaves every twenty minutes and returns before dark."
                   for i in range(12))


def image_only_pdf(rgb: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_image(pymupdf.Rect(72, 72, 372, 297), stream=png(*size, rgb=rgb))
    return pdf.tobytes()


def docx_bytes(paragraphs: list[str], image: bytes | None = None) -> bytes:
    import docx
    from docx.shared import Inches

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if image is not None:
        document.add_picture(io.BytesIO(image), width=Inches(1))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


async def test_two_different_image_only_pdfs_are_both_ready(client, container) -> None:
    kb = await make_kb(client)
    a = (await upload(client, kb, "scan.pdf", image_only_pdf((200, 30, 30), (80, 60)))).json()["id"]
    b = (await upload(client, kb, "scan.pdf", image_only_pdf((20, 120, 220), (64, 64)))).json()["id"]
    await run(container)
    first, second = await doc(client, a), await doc(client, b)
    assert (first["status"], second["status"]) == ("READY", "READY")
    assert first["duplicate_of"] is None and second["duplicate_of"] is None
    assert "too little text" in second["dedup"]["skipped"]


async def test_test_in_a_docx_and_test_in_an_html_page_are_not_merged(client, container) -> None:
    kb = await make_kb(client)
    a = (await upload(client, kb, "test.docx", docx_bytes(["TEST"]))).json()["id"]
    b = (await upload(client, kb, "test.html", b"<html><body><p>Test</p></body></html>", "text/html")).json()["id"]
    await run(container)
    assert [(await doc(client, x))["status"] for x in (a, b)] == ["READY", "READY"]


async def test_same_text_different_images_is_not_identical_same_images_is(client, container) -> None:
    kb = await make_kb(client)
    paragraphs = TEXT.split("\n\n")
    red = (await upload(client, kb, "manual.docx", docx_bytes(paragraphs, png(40, 40, (200, 30, 30))))).json()["id"]
    await run(container)
    blue = (await upload(client, kb, "manual.docx", docx_bytes(paragraphs, png(40, 40, (20, 120, 220))))).json()["id"]
    await run(container)
    assert [(await doc(client, x))["status"] for x in (red, blue)] == ["READY", "READY"]
    again = (await upload(client, kb, "manual.docx", docx_bytes(paragraphs, png(40, 40, (20, 120, 220))))).json()["id"]
    await run(container)
    old, new = await doc(client, blue), await doc(client, again)
    assert (old["status"], old["duplicate_of"], old["dedup"]["verdict"]) == ("OUTDATED", again, "identical")
    assert new["status"] == "READY" and (await doc(client, red))["status"] == "READY"

"""Offline OCR (RapidOCR, the models inside its wheel) on generated scans: uploaded images (PNG,
JPEG, multi-page TIFF, WebP), image-only PDF pages, PDF pages whose text layer cannot be read,
the ``off``/``auto``/``force`` modes, page and box locators, the page image as an asset, and the
per-page progress of an isolated parse."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pymupdf
import pytest

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.ocr import Line, join_lines
from ultimate_rag.adapters.parsers.ocr_lines import paragraphs
from ultimate_rag.domain.errors import InvalidDocumentError, UnsupportedFormatError
from ultimate_rag.domain.models import DocumentSource, SourceLocator

from .office_builders import image_bytes, multipage_tiff, scan_image, scan_pdf
from .pdf_builders import TAM_GARBAGE

INVOICE = "Invoice 4711 covers the heron migration ledger"
PAID = "paid on the first of March"
WHALE = "蓝色鲸鱼在午夜唱歌"
CLAUSE = "合同第七条款已经生效"


def source(name: str, data: bytes) -> DocumentSource:
    return DocumentSource(None, name, "application/octet-stream", data)


def parse(name: str, data: bytes, limits: ParseLimits | None = None):
    src = source(name, data)
    return default_registry(limits).resolve(src).parse(src)


def small_scan(lines: list[str]):
    return scan_image(lines, size=(1200, 300), top=60)


def words(text: str) -> str:
    return " ".join(text.split())


def test_lines_become_paragraphs_by_position_and_cjk_lines_join_without_spaces() -> None:
    lines = [Line("First line of", (10, 10, 300, 40)), Line("the paragraph.", (10, 48, 280, 78)),
             Line("A new paragraph far below.", (10, 200, 400, 230)),
             Line("A side note", (700, 205, 900, 235))]
    groups = paragraphs(lines)
    assert [[line.text for line in g] for g in groups] == [
        ["First line of", "the paragraph."], ["A new paragraph far below."], ["A side note"]]
    assert join_lines(["蓝色鲸鱼", "在午夜唱歌"]) == "蓝色鲸鱼在午夜唱歌"
    assert join_lines(["invoice", "4711"]) == "invoice 4711"


def test_png_text_is_read_with_page_box_and_the_image_as_asset() -> None:
    data = image_bytes(small_scan([INVOICE, PAID]), "PNG")
    parsed = parse("scan.png", data)
    text = [b for b in parsed.blocks if b.kind == "paragraph"]
    assert INVOICE.lower() in words(" ".join(b.text for b in text)).lower()
    assert parsed.assets[0].data == data and parsed.assets[0].locator_key == "page-1/image"
    for block in text:
        assert block.locator.page == 1 and block.asset_ids == ("page-1/image",)
        x0, y0, x1, y1 = block.locator.bbox
        assert 100 <= x0 < x1 <= 1200 and 30 <= y0 < y1 <= 300
    assert parsed.metadata["ocr_pages"] == 1 and "warnings" not in parsed.metadata


def test_jpeg_and_webp_are_detected_by_content_and_read() -> None:
    for name, fmt in (("scan.jpg", "JPEG"), ("scan.webp", "WEBP")):
        parsed = parse(name, image_bytes(small_scan([WHALE, "Order 88 ships today"]), fmt, quality=95))
        text = "".join(b.text for b in parsed.blocks if b.kind == "paragraph")
        assert WHALE in text and "88" in text, (name, text)
    with pytest.raises(UnsupportedFormatError, match="image/png"):
        default_registry().resolve(source("scan.jpg", image_bytes(small_scan(["x"]), "PNG")))


def test_a_multipage_tiff_is_read_page_by_page() -> None:
    data = multipage_tiff([small_scan([INVOICE]), small_scan([CLAUSE])])
    parsed = parse("fax.tiff", data)
    pages = {b.locator.page: b.text for b in parsed.blocks if b.kind == "paragraph"}
    assert INVOICE.lower() in words(pages[1]).lower() and CLAUSE in pages[2]
    assert [(a.locator_key, a.mime_type, a.page) for a in parsed.assets] == [
        ("page-1/image", "image/png", 1), ("page-2/image", "image/png", 2)]


def test_ocr_off_keeps_the_image_without_text_and_says_so() -> None:
    parsed = parse("scan.png", image_bytes(small_scan([INVOICE]), "PNG"), ParseLimits(ocr="off"))
    assert [b.kind for b in parsed.blocks] == ["figure"]
    assert parsed.metadata["warnings"] == ["OCR is off: the image's text was not read"]


def test_an_image_too_large_to_decode_fails_before_decoding() -> None:
    with pytest.raises(InvalidDocumentError, match="more than 4 times the limit of 1000 pixels"):
        parse("scan.png", image_bytes(small_scan([INVOICE]), "PNG"), ParseLimits(max_image_pixels=1000))


def test_a_scanned_pdf_in_english_and_chinese_is_read_with_page_boxes_in_points() -> None:
    parsed = parse("scan.pdf", scan_pdf([[INVOICE, PAID], [WHALE, CLAUSE]]))
    pages = {b.locator.page: words(b.text) for b in parsed.blocks if b.kind == "paragraph"}
    assert INVOICE.lower() in pages[1].lower() and WHALE in pages[2] and CLAUSE in pages[2]
    assert parsed.metadata["warnings"] == [
        "pages 1–2 of 2: no text layer (scanned images); their text was read by OCR"]
    assert [(a.locator_key, a.mime_type) for a in parsed.assets] == [("page-1/scan", "image/jpeg"),
                                                                   ("page-2/scan", "image/jpeg")]
    for block in parsed.blocks:
        if block.kind == "paragraph":
            x0, y0, x1, y1 = block.locator.bbox
            assert 0 <= x0 < x1 <= 612 and 0 <= y0 < y1 <= 792  # PDF points, not pixels
    chunks = StructuredChunker(lambda text: max(1, len(text) // 3)).split(
        parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1, chunk_size=24, overlap=0)
    page_two = [c for c in chunks if CLAUSE in c.content]
    assert page_two and page_two[0].locator.page == 2 and page_two[0].locator.bbox is not None
    assert SourceLocator.from_metadata(page_two[0].locator.to_metadata()) == page_two[0].locator


def unreadable_layer_over_a_scan() -> bytes:
    """A page whose text layer is glyph codes (invisible, as an OCR'd scan with a broken font has)
    over an image that shows the real text: the text layer is unreadable, the image is not."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_image(page.rect, stream=image_bytes(scan_image([INVOICE, PAID]), "PNG"))
    for i in range(6):
        page.insert_text((72, 72 + 14 * i), TAM_GARBAGE, fontsize=10, render_mode=3)
    return doc.tobytes()


def test_a_page_with_an_unreadable_text_layer_is_read_by_ocr_instead() -> None:
    parsed = parse("broken.pdf", unreadable_layer_over_a_scan())
    assert INVOICE.lower() in words(parsed.text).lower()
    assert parsed.metadata["warnings"] == ["page 1 of 1: the text layer cannot be read (its fonts have no Unicode "
                                           "map); their text was read by OCR"]
    with pytest.raises(InvalidDocumentError, match="it needs OCR"):
        parse("broken.pdf", unreadable_layer_over_a_scan(), ParseLimits(ocr="off"))


def test_force_reads_a_text_pdf_by_ocr_and_off_keeps_a_scan_as_an_image() -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 100), "Typed text that OCR reads as well", fontsize=20)
    parsed = parse("typed.pdf", doc.tobytes(), ParseLimits(ocr="force"))
    assert "OCR reads as well" in parsed.text and parsed.metadata["ocr_pages"] == 1
    plain = parse("typed.pdf", doc.tobytes())
    assert "ocr_pages" not in plain.metadata and not plain.assets
    off = parse("scan.pdf", scan_pdf([[INVOICE]]), ParseLimits(ocr="off"))
    assert [b.kind for b in off.blocks] == ["figure"] and "ocr_pages" not in off.metadata


def test_isolated_ocr_reports_pages_done_and_total() -> None:
    data = multipage_tiff([small_scan([INVOICE]), small_scan([CLAUSE])])
    seen: list[tuple[int, int]] = []

    async def on_progress(done: int, total: int) -> None:
        seen.append((done, total))

    async def run():
        src = source("fax.tif", data)
        return await ParseRunner(timeout_seconds=120).parse(default_registry().resolve(src), src, on_progress)

    parsed = asyncio.run(run())
    assert CLAUSE in parsed.text
    assert seen and seen[-1] == (2, 2) and all(total == 2 for _, total in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_png_named_pdf_and_pdf_named_png_are_refused() -> None:
    with pytest.raises(UnsupportedFormatError):
        default_registry().resolve(source("scan.pdf", image_bytes(small_scan(["x"]), "PNG")))
    with pytest.raises(UnsupportedFormatError):
        default_registry().resolve(source("scan.png", scan_pdf([["x"]])))
    assert {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"} <= set(default_registry().supported_extensions)


def test_an_image_parse_past_the_memory_limit_fails_readably() -> None:
    data = image_bytes(small_scan([INVOICE]), "PNG")
    src = source("scan.png", data)
    # 300 MB: too little for the OCR engine to start. (Since the parse child no longer maps PyMuPDF,
    # 400 MB lets it start and fail inside onnxruntime's native code, a crash rather than a MemoryError.)
    with pytest.raises(InvalidDocumentError, match="more memory than the limit of 300 MB"):
        asyncio.run(ParseRunner(memory_limit_mb=300, timeout_seconds=120).parse(default_registry().resolve(src), src))




def test_only_tiff_pages_are_pages_an_animated_png_is_read_once() -> None:
    frames = [small_scan([INVOICE]), small_scan([CLAUSE])]
    buffer = image_bytes(frames[0], "PNG", save_all=True, append_images=[frames[1].copy()])
    parsed = parse("anim.png", buffer, ParseLimits(ocr="off"))
    assert parsed.metadata["page_count"] == 1 and len(parsed.assets) == 1

"""The layout model on born-digital PDF pages (pdf_layout.py): run where the text layer leaves the
structure in doubt (a picture, a caption line, loose aligned numbers), skipped on running text;
vector charts become image assets described by their caption, captions are read right after
their figure, titles become headings, edge headers go to the metadata, and table regions are read
as tables. Real model, generated PDFs (pdf_builders.py); about a second of model time in all.
Also the TeX math fonts PDFium gives raw codes for (tex_math_fonts.py)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import uuid4

import pymupdf
import pytest

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers.layout import Region
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.pdf_engine import open_pdf
from ultimate_rag.adapters.parsers.pdf_layout import layout_reason, table_regions
from ultimate_rag.adapters.parsers.pdf_lines import Line, build_lines
from ultimate_rag.adapters.parsers.pdf_text import Item
from ultimate_rag.domain.models import DocumentSource, ParsedDocument

from .pdf_builders import BODY, chart_page_pdf, photo_page_pdf, tex_math_pdf, tracemonkey_like

CAPTION = "Figure 1: Passengers carried per quarter, in thousands, all routes"


def parse(data: bytes, *, engine: str = "pdfium", layout: bool = True) -> ParsedDocument:
    return PdfParser(ParseLimits(pdf_engine=engine, pdf_layout=layout)).parse(
        DocumentSource(uuid4(), "file.pdf", "application/pdf", data))


@pytest.mark.parametrize("engine", ["pdfium", "pymupdf"])
def test_a_vector_chart_becomes_a_figure_described_by_its_caption(engine: str) -> None:
    parsed = parse(chart_page_pdf(), engine=engine)
    assert parsed.metadata["layout_pages"] == 1
    [asset] = parsed.assets
    assert asset.locator_key == "page-1/figure-1" and asset.mime_type == "image/jpeg" and asset.page == 1
    assert asset.description == CAPTION and len(asset.data) > 1000
    kinds = [(b.kind, b.text) for b in parsed.blocks]
    figure = next(i for i, (kind, _) in enumerate(kinds) if kind == "figure")
    assert kinds[figure][1] == f"[Image on page 1: {CAPTION}]"
    assert kinds[figure + 1] == ("paragraph", CAPTION)  # read right after its figure
    assert kinds[figure + 2] == ("paragraph", "Q1 Q2 Q3 Q4 Q5")  # the chart's labels, together
    assert ("heading", "Ferry traffic in the harbour") in kinds
    # the one-page document's header line is furniture (the text layer needs it on 2 pages)
    assert parsed.metadata["page_furniture"] == {"page_numbers": 1,
                                                 "headers": ["Harbour Authority Annual Report 2024"]}
    assert not any("Harbour Authority" in text for _, text in kinds)
    chunk = next(c for c in StructuredChunker(lambda text: max(1, len(text) // 3)).split(
        parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1, chunk_size=96, overlap=0)
        if "[Image on page 1" in c.content)
    assert CAPTION in chunk.content and chunk.metadata["asset_keys"] == ["page-1/figure-1"]


def test_without_the_model_the_text_layer_alone_is_read() -> None:
    parsed = parse(chart_page_pdf(), layout=False)
    assert "layout_pages" not in parsed.metadata and parsed.assets == ()
    assert any(b.text == "Harbour Authority Annual Report 2024" for b in parsed.blocks)


def test_a_picture_gets_its_caption_and_a_bold_title_is_a_heading() -> None:
    parsed = parse(photo_page_pdf())
    [asset] = parsed.assets
    assert asset.locator_key == "page-1/image-1"
    assert asset.description == "The north pier at dawn, seen from the morning ferry"
    kinds = [(b.kind, b.text) for b in parsed.blocks]
    assert kinds[0][0] == "heading" and kinds[0][1] == "Ferry timetable and piers"
    figure = next(i for i, (kind, _) in enumerate(kinds) if kind == "figure")
    assert kinds[figure + 1] == ("paragraph", asset.description)


def test_running_text_pages_skip_the_model() -> None:
    data, _ = tracemonkey_like()
    assert "layout_pages" not in parse(data).metadata


def _page_lines(draw: Sequence[tuple[float, float, str]]) -> list[Line]:
    doc = pymupdf.open()
    page = doc.new_page()
    for x, y, text in draw:
        page.insert_text((x, y), text, fontsize=9)
    pdf, _ = open_pdf("pdfium", doc.tobytes())
    try:
        return build_lines(pdf.glyphs(0), pdf.rules(0))
    finally:
        pdf.close()


def test_a_table_region_is_read_as_a_table_where_the_text_layer_found_none() -> None:
    cells = [["Pier", "Winter", "Summer"], ["North", "14", "22"]]  # two rows: too few for the text layer
    lines = _page_lines([(72 + 100 * k, 100 + 14 * r, cell) for r, row in enumerate(cells)
                         for k, cell in enumerate(row)] + [(72, 160, BODY[:80])])
    region = Region("table", (60, 85, 400, 120), 0.9)
    found, rest = table_regions([region], [], lines, 1, 595)
    assert len(found) == 1 and found[0].table is not None
    assert found[0].table.header == ["Pier", "Winter", "Summer"] and found[0].table.rows == [["North", "14", "22"]]
    assert [ln.text for ln in rest] == [BODY[:80]]
    assert table_regions([Region("text", region.box, 0.9)], [], lines, 1, 595)[0] == []


def test_why_the_model_runs() -> None:
    prose = _page_lines([(72, 100 + 13 * k, BODY[k * 20:k * 20 + 60]) for k in range(4)])
    assert layout_reason(prose, [], [], (595, 842)) == ""
    numbers = _page_lines([(72, 100 + 13 * k, f"Route {k}   120   340   560") for k in range(3)] + [(72, 200, BODY[:60])])
    assert layout_reason(numbers, [], [], (595, 842)) == "numbers"
    caption = _page_lines([(72, 100, "Table 3: Crossings"), *[(72, 120 + 13 * k, BODY[:60]) for k in range(3)]])
    assert layout_reason(caption, [], [], (595, 842)) == "caption"


def test_raw_codes_of_tex_math_fonts_are_mapped_back_by_the_font_name() -> None:
    """pdfTeX's CMSY/CMMI without a Unicode map (tex_math_fonts.py): the symbols, not their raw
    codes; the digits and letters of the text font stay as they are."""
    [block] = parse(tex_math_pdf()).blocks
    assert block.text == "The derivative f′ of the density ϱ with ⟨x⟩ and ‖x‖ where a ≠ b in 2024."


def test_a_failing_model_leaves_the_page_to_its_text_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fake failure: a real onnxruntime error cannot be provoked on demand with the shipped model
    def broken(image: object, **_: object) -> list[Region]:
        raise RuntimeError("onnxruntime: invalid graph")

    monkeypatch.setattr("ultimate_rag.adapters.parsers.layout.detect", broken)
    parsed = parse(chart_page_pdf())
    assert "layout_pages" not in parsed.metadata and parsed.metadata["pdf_engine"] == "pdfium"  # not pypdf's fallback
    assert any(b.text == CAPTION for b in parsed.blocks) and parsed.assets == ()


def test_a_picture_wakes_the_model_only_with_a_caption_the_text_layer_cannot_tell() -> None:
    picture = Item(150, 200, 450, 380)
    body = [(72, 100 + 13 * k, BODY[k * 10:k * 10 + 70]) for k in range(4)] + [(72, 395, BODY[:70])]
    assert layout_reason(_page_lines(body), [], [picture], (595, 842)) == ""  # body text right under it
    named = _page_lines([*body[:4], (150, 395, "Figure 2: The north pier")])
    assert layout_reason(named, [], [picture], (595, 842)) == ""  # the text layer pairs "Figure 2" itself
    doc = pymupdf.open()
    page = doc.new_page()
    for x, y, text in body[:4]:
        page.insert_text((x, y), text, fontsize=9)
    page.insert_text((150, 393), "The north pier at dawn", fontsize=7)  # smaller: a caption without "Figure"
    pdf, _ = open_pdf("pdfium", doc.tobytes())
    lines = build_lines(pdf.glyphs(0))
    pdf.close()
    assert layout_reason(lines, [], [picture], (595, 842)) == "image"

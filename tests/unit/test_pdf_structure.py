"""PDF structure on generated files shaped like real ones, with both engines (PDFium, the default;
PyMuPDF, the optional extra): tables as rows under their header (ruled, unruled, merged header
cells, continued over a page break), page furniture and contents lines out of the body, Arabic
presentation forms, glyph codes that read as punctuation, and the page rendering OCR uses."""

from __future__ import annotations

from uuid import uuid4

import pytest

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.pdf_engine import check_engine, open_pdf, render_page
from ultimate_rag.adapters.parsers.text_quality import UNREADABLE_REASON, is_symbol_soup, is_unreadable
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, Chunk, DocumentSource, ParsedDocument

from .pdf_builders import (
    CREDIT_HEADER,
    CREDIT_ROWS,
    TOC,
    arabic_presentation_forms_pdf,
    chinese_tables_like,
    contents_pdf,
    credit_table_pdf,
    cython_like,
    glyph_codes_pdf,
    ruled_table_pdf,
    tracemonkey_like,
    unruled_table_pdf,
)

ENGINES = ["pdfium", "pymupdf"]


def parse(data: bytes, engine: str, *, ocr: str = "auto") -> ParsedDocument:
    return PdfParser(ParseLimits(pdf_engine=engine, ocr=ocr)).parse(
        DocumentSource(uuid4(), "file.pdf", "application/pdf", data))


def chunks(parsed: ParsedDocument, size: int = 96) -> list[Chunk]:
    # a small budget, so that tables are cut into several chunks (one token ~ 3 characters)
    return StructuredChunker(lambda text: max(1, len(text) // 3)).split(
        parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1, chunk_size=size, overlap=0)


def tables(parsed: ParsedDocument) -> list[Block]:
    return [b for b in parsed.blocks if b.kind == "table"]


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_credit_table_is_rows_under_their_header(engine: str) -> None:
    """chinese-tables.pdf: "how much of the Bank of Jiangsu line is unused?" needs 江苏银行 and 0.00
    in one chunk with the column 剩余额度 (remaining)."""
    data, _ = credit_table_pdf()
    parsed = parse(data, engine)
    [table] = tables(parsed)
    assert table.text.split("\n")[0] == row(CREDIT_HEADER)
    # rows as the table counts them (its header is row 1), the table's number in the document
    assert [r.row_start for r in table.rows] == list(range(2, 13)) and {(r.page, r.table) for r in table.rows} == {(1, 1)}
    assert row(CREDIT_ROWS[7]) in table.text  # | 8 | 江苏银行 | 218,597.00 | 218,597.00 | 0.00 |
    cut = [c for c in chunks(parsed, 48) if "江苏银行" in c.content]
    assert cut and all(row(CREDIT_HEADER) in c.content and "0.00" in c.content for c in cut)
    assert all(c.locator.page == 1 and c.locator.table == 1 and (c.locator.row_start or 99) <= 9 <= (c.locator.row_end or 0)
               for c in cut)
    assert len(chunks(parsed, 48)) > 2  # the table was cut, and each part kept its header


@pytest.mark.parametrize("engine", ENGINES)
def test_a_ruled_table_with_merged_header_cells_continues_over_a_page_break(engine: str) -> None:
    data, expected = ruled_table_pdf()
    parsed = parse(data, engine)
    [table] = tables(parsed)
    assert table.text.split("\n")[0] == row(expected[0])  # Pier | 2023 / Q1 | 2023 / Q2 | 2024 / Q1 | 2024 / Q2
    assert table.text.split("\n")[2:] == [row(r) for r in expected[1:]]  # 60 rows, the repeated header gone
    assert [r.page for r in table.rows] == [1] * 32 + [2] * 28
    # rows 3-62: two header rows drawn on page 1; the header drawn again on page 2 is not counted
    assert (table.locator.page_start, table.locator.page_end, table.locator.row_start, table.locator.row_end) == (
        1, 2, 3, 62)
    # furniture: the running header is metadata, "Page N of 2" is dropped; neither is in a block
    assert parsed.metadata["page_furniture"] == {"headers": ["Harbour Authority Annual Report 2024"], "page_numbers": 2}
    assert not any("Annual Report" in b.text or "Page 1 of 2" in b.text for b in parsed.blocks)
    parts = [c for c in chunks(parsed) if "Pier 3" in c.content]
    assert len(parts) >= 3 and all(c.content.startswith(row(expected[0])) for c in parts)
    across = next(c for c in parts if "Pier 32 |" in c.content and "Pier 33 |" in c.content)
    assert (across.locator.page_start, across.locator.page_end) == (1, 2)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_unruled_table_continues_over_a_page_break_without_its_header(engine: str) -> None:
    data, expected = unruled_table_pdf()
    parsed = parse(data, engine)
    [table] = tables(parsed)
    assert table.text.split("\n") == [row(expected[0]), "|---|---|---|---|", *(row(r) for r in expected[1:])]
    assert [r.page for r in table.rows] == [1] * 40 + [2] * 10
    assert "Dynamic languages" in next(b.text for b in parsed.blocks if b.kind == "paragraph")


@pytest.mark.parametrize("build", [tracemonkey_like, cython_like])
def test_prose_and_title_pages_are_not_tables(build) -> None:
    for engine in ENGINES:
        assert not tables(parse(build()[0], engine))


def test_a_table_without_a_header_row_is_named_by_column() -> None:
    parsed = parse(chinese_tables_like()[0], "pdfium")
    [table] = tables(parsed)
    assert table.text.startswith(row(["column 1", "column 2", "column 3", "column 4"]))


@pytest.mark.parametrize("engine", ENGINES)
def test_contents_lines_and_running_lines_are_metadata_not_body(engine: str) -> None:
    data, body = contents_pdf()
    parsed = parse(data, engine)
    assert parsed.metadata["contents"] == [{"title": title, "page": page} for title, page in TOC]
    assert parsed.metadata["page_furniture"]["headers"] == ["Cython Reference Guide, Release 0.29a0"]
    assert parsed.metadata["page_furniture"]["footers"] == ["3 Chapter 1. Getting Started",
                                                            "6 Chapter 2. Language Basics"]
    text = "\n".join(b.text for b in parsed.blocks)
    assert ". . ." not in text and "Release 0.29a0" not in text and "Chapter 1. Getting" not in text
    assert all(sentence in text for sentence in body)
    assert ("1.1 What is Cython?", 3) in [(b.text, b.locator.page) for b in parsed.blocks if b.kind == "heading"]
    assert not [b for b in parsed.blocks if b.locator.page == 2]  # the contents page, its title too


@pytest.mark.parametrize("engine", ENGINES)
def test_arabic_presentation_forms_are_indexed_as_letters(engine: str) -> None:
    parsed = parse(arabic_presentation_forms_pdf(), engine)
    text = parsed.text
    assert "مرحبا" in text and not any("\ufb50" <= ch <= "\ufeff" for ch in text)
    assert "2024" in text.split()  # not glued to the word before it


@pytest.mark.parametrize("engine", ENGINES)
def test_glyph_codes_that_read_as_punctuation_are_unreadable(engine: str) -> None:
    """OCRmyPDF's truetype_font_nomapping.pdf: its only text is ``"7+%-``."""
    with pytest.raises(InvalidDocumentError) as info:
        parse(glyph_codes_pdf(), engine, ocr="off")
    assert info.value.message == UNREADABLE_REASON
    assert is_symbol_soup('"7+%-') and is_unreadable('"7+%-')
    for text in ("330,435.30", "[0, 1] × [0, 1]", "(1) - (2) = 3%", "12:30-14:00", "---", "= Z", "E = mc2"):
        assert not is_unreadable(text), text


@pytest.mark.parametrize("engine", ENGINES)
def test_render_page_for_ocr_and_layout(engine: str) -> None:
    pdf, repaired = open_pdf(engine, credit_table_pdf()[0])
    try:
        image, scale = render_page(pdf, 0, dpi=144, max_pixels=3_000_000)
        assert repaired == [] and image.mode == "RGB" and scale == 2.0
        assert image.size == (1190, 1684)  # A4 at 144 dpi
        small, scale = render_page(pdf, 0, dpi=300, max_pixels=100_000)
        assert small.size[0] * small.size[1] <= 100_000 and scale < 1
    finally:
        pdf.close()


def test_an_engine_that_is_not_installed_or_unknown_is_refused_at_start() -> None:
    assert check_engine("pdfium") == "pdfium" and check_engine("pymupdf") == "pymupdf"
    with pytest.raises(ValueError, match="'pdfium' \\(default\\) or 'pymupdf'"):
        PdfParser(ParseLimits(pdf_engine="mupdf"))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_file_cut_short_keeps_the_pages_whose_objects_are_complete(engine: str) -> None:
    import pymupdf

    from ultimate_rag.adapters.parsers.pdf_fallback import SALVAGED_WARNING

    doc = pymupdf.open()
    for n in range(1, 4):
        doc.new_page().insert_text((72, 72), f"Recovered sentence number {n} about harbour ferries.", fontsize=11)
    whole = doc.tobytes()
    parsed = parse(whole[: len(whole) * 6 // 10], engine)  # no trailer, no cross-reference table, no page 3
    assert "number 1 about" in parsed.text and "number 2 about" in parsed.text
    assert parsed.metadata["warnings"] == [SALVAGED_WARNING] and parsed.metadata["pdf_engine"] == engine


@pytest.mark.parametrize("engine", ENGINES)
def test_three_columns_are_read_in_turn(engine: str) -> None:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 60), "Three Columns of Harbour News", fontsize=20)
    for c in range(3):
        for p in range(3):
            page.insert_textbox(pymupdf.Rect(40 + 180 * c, 100 + 120 * p, 200 + 180 * c, 200 + 120 * p),
                                f"Column {c + 1} paragraph {p + 1}: " + "the ferry leaves at dawn with the mail. " * 2,
                                fontsize=9)
    parsed = parse(doc.tobytes(), engine)
    assert [b.text[:20] for b in parsed.blocks] == ["Three Columns of Har"] + [
        f"Column {c} paragraph {p}" for c in (1, 2, 3) for p in (1, 2, 3)]

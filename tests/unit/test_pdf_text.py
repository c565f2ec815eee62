"""The PDF parser on generated files shaped like real ones that lost text: headings that are body
text, titles over several lines, title pages, unreadable text layers, a page tree MuPDF cannot
read. Every string drawn on a page must reach some block (apart from unreadable glyph codes)."""

from __future__ import annotations

import re

import pymupdf
import pytest

from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.pdf_fallback import PAGE_TREE_WARNING, parse_with_pypdf
from ultimate_rag.adapters.parsers.pdf_text import heading_like
from ultimate_rag.adapters.parsers.text_quality import (
    UNREADABLE_REASON,
    is_unreadable,
    page_is_unreadable,
    page_ranges,
)
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource, ParsedDocument

from .pdf_builders import (
    CREDIT,
    READABLE,
    SHIFTED,
    TAM_GARBAGE,
    chinese_tables_like,
    cython_like,
    table_header_pdf,
    tracemonkey_like,
    unreadable_pdf,
    zero_count_pdf,
)

ENGINES = ["pdfium", "pymupdf"]  # the default, and the optional extra (installed with the test tools)


def parse(data: bytes, engine: str = "pdfium") -> ParsedDocument:
    return PdfParser(ParseLimits(pdf_engine=engine)).parse(DocumentSource(None, "file.pdf", "application/pdf", data))


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def assert_all_text_kept(parsed: ParsedDocument, drawn: list[str]) -> None:
    everything = _squeeze("".join(b.text for b in parsed.blocks))
    missing = [text for text in drawn if _squeeze(text) not in everything]
    assert not missing, missing


def headings(parsed: ParsedDocument) -> list[tuple[str, int, int | None]]:
    return [(b.text, b.level, b.locator.page) for b in parsed.blocks if b.kind == "heading"]


def test_a_title_over_three_lines_is_one_heading_and_author_lines_are_text() -> None:
    data, drawn = tracemonkey_like()
    parsed = parse(data)
    assert headings(parsed)[0] == (
        "Trace-based Just-in-Time Type Specialization for Dynamic Languages with Loop Nesting", 1, 1)
    assert [h[0] for h in headings(parsed)][1:] == ["Abstract", "1. Introduction"]
    paragraphs = " ".join(b.text for b in parsed.blocks if b.kind == "paragraph")
    assert "Andreas Gal, Brendan Eich" in paragraphs and "@mozilla.com" in paragraphs
    assert_all_text_kept(parsed, drawn)


def test_a_title_page_keeps_release_authors_and_date_as_text() -> None:
    data, drawn = cython_like()
    parsed = parse(data)
    assert headings(parsed) == [("Cython Reference Guide", 1, 1), ("Compilation", 2, 2),
                                ("1.1 Compiling from the command line", 3, 2)]
    page_one = [b.text for b in parsed.blocks if b.kind == "paragraph" and b.locator.page == 1]
    assert page_one == ["Release 0.29a0", "Stefan Behnel, Robert Bradshaw, William Stein",
                        "Gary Furnish, Dag Seljebotn, Greg Ewing", "Gabriel Gellner, editor", "August 19, 2018"]
    assert_all_text_kept(parsed, drawn)


def test_body_sentences_in_a_font_larger_than_a_dominant_table_are_not_headings() -> None:
    data, drawn = chinese_tables_like()
    parsed = parse(data)
    # the table's cells are a table now, so the body size is the paragraphs' and the caption is body text
    assert [h[0] for h in headings(parsed)] == ["第七章企业资信状况", "二、授信情况"]
    assert next(b for b in parsed.blocks if b.text.startswith("表7-2")).kind == "paragraph"
    table = next(b for b in parsed.blocks if b.kind == "table")
    assert "| 8 | 江苏银行 |" in table.text and len(table.rows) == 22  # no header drawn: every row is data
    assert table.text.startswith("| column 1 | column 2 | column 3 | column 4 |")
    credit = next(b for b in parsed.blocks if "372.53亿元" in b.text)
    assert credit.kind == "paragraph" and credit.text.startswith(CREDIT) and credit.text.endswith("120.47亿元。")
    assert next(b for b in parsed.blocks if b.text == "251,000.00").kind == "paragraph"
    assert_all_text_kept(parsed, drawn)


def test_table_header_cells_in_a_larger_font_are_not_headings() -> None:
    data, drawn = table_header_pdf()
    parsed = parse(data)
    assert [h[0] for h in headings(parsed)] == ["3.2 Departures"]
    table = next(b for b in parsed.blocks if b.kind == "table")
    assert table.text == "| Pier | Departure | Arrival |\n|---|---|---|\n| Four | 06:00 | 06:40 |\n| Two | 23:59 | 00:35 |"
    assert_all_text_kept(parsed, drawn)


@pytest.mark.parametrize(("text", "heading"), [
    ("1. Introduction", True), ("Compilation", True), ("第七章企业资信状况", True), ("一、发行人历史信用评级情况", True),
    ("Overview of the Technology Acceptance Model: Origins, Developments and Future Directions", True),
    ("本次发行不引用主体评级，未进行债项评级安排。", False),  # a CJK sentence
    ("This section was moved to the user guide.", False),  # a sentence
    ("It works. Then it stops", False),  # two sentences
    ("Stefan Behnel, Robert Bradshaw, William Stein", False),  # a list of names
    ("{gal,brendan}@mozilla.com", False), ("330,435.30", False), ("Overview of the Model: Origins,", False),
    (" ".join(["word"] * 25), False),  # body length
])
def test_heading_like(text: str, heading: bool) -> None:
    assert heading_like(text) is heading


# -- unreadable text layers ------------------------------------------------------------------

def test_the_readability_rule_on_real_extracted_strings() -> None:
    assert is_unreadable(TAM_GARBAGE)
    assert all(is_unreadable(line) for line in SHIFTED)
    assert not is_unreadable(READABLE)
    assert not is_unreadable("A stray\x00 NUL in a long and otherwise perfectly normal sentence of text.")
    assert not is_unreadable("私有区域 \ue000 一个私有字符在正常的中文句子里并不算乱码，这句话是可读的。")
    assert not is_unreadable("\uf0b7 Yes \uf0b7 No \uf0a7 Maybe")  # symbol-font bullets stand alone
    assert is_unreadable("\ue001\ue002\ue003 \ue004\ue005")  # a private-use run is glyph codes
    assert page_is_unreadable([TAM_GARBAGE * 3, "Page 4"])
    assert not page_is_unreadable([READABLE * 3, SHIFTED[0]])
    assert page_ranges([2, 3, 4, 7, 9, 10]) == "2–4, 7, 9–10"


def test_unreadable_pages_are_left_out_with_a_warning() -> None:
    parsed = parse(unreadable_pdf(readable_pages=1, unreadable_pages=3))
    assert {b.locator.page for b in parsed.blocks} == {1}
    assert READABLE in parsed.text and not any(is_unreadable(b.text) for b in parsed.blocks)
    assert parsed.metadata["warnings"] == [
        "pages 2–4 of 4: the text layer cannot be read (its fonts have no Unicode map) and was not indexed; "
        "those pages need OCR"]


def test_a_letter_shifted_block_on_a_readable_page_is_left_out() -> None:
    parsed = parse(unreadable_pdf(readable_pages=1, unreadable_pages=0, shifted_block=True))
    assert READABLE in parsed.text and "EDAKTION" not in parsed.text and "\x00" not in parsed.text
    assert parsed.metadata["warnings"] == [
        "some text on page 1 cannot be read (a font without a Unicode map) and was not indexed"]


def test_a_wholly_unreadable_pdf_fails_with_a_reason() -> None:
    with pytest.raises(InvalidDocumentError) as info:
        parse(unreadable_pdf(readable_pages=0, unreadable_pages=2))
    assert info.value.message == UNREADABLE_REASON


# -- a second reader and errors in plain words ---------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_a_page_tree_that_lies_about_its_size_still_gives_every_page(engine: str) -> None:
    data, texts = zero_count_pdf()
    assert pymupdf.open(stream=data, filetype="pdf").page_count == 0  # MuPDF alone finds nothing
    parsed = parse(data, engine)
    assert [(b.text, b.locator.page) for b in parsed.blocks] == [(texts[0], 1), (texts[1], 2)]
    assert parsed.metadata["page_count"] == 2
    # PDFium walks the page tree's kids and finds both pages; for MuPDF the tree is rebuilt (pypdf)
    assert parsed.metadata.get("warnings", []) == ([PAGE_TREE_WARNING] if engine == "pymupdf" else [])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_missing_page_tree_is_rebuilt_from_the_page_objects(engine: str) -> None:
    """py-pdf's unreadablemetadata.pdf: the catalog names a /Pages object the file does not hold."""
    data, texts = zero_count_pdf()
    data = re.sub(rb"/Pages (\d+) 0 R", b"/Pages 999 0 R", data, count=1)
    assert pymupdf.open(stream=data, filetype="pdf").page_count == 0
    parsed = parse(data, engine)
    assert {b.text for b in parsed.blocks} == set(texts)
    assert parsed.metadata["warnings"] == [PAGE_TREE_WARNING] and parsed.metadata["pdf_engine"] == engine


def test_pypdf_reads_the_text_of_a_page_tree_alone() -> None:
    data, texts = zero_count_pdf()
    parsed = parse_with_pypdf(data, ParseLimits(), "no pages")
    assert [(b.text, b.locator.page) for b in parsed.blocks] == [(texts[0], 1), (texts[1], 2)]
    assert parsed.metadata["pdf_reader"] == "pypdf" and parsed.metadata["page_count"] == 2
    assert "read with a simpler reader" in parsed.metadata["warnings"][0]


@pytest.mark.parametrize("data", [
    b"%PDF-1.7\n1 0 obj\n<< garbage >>\n" + bytes(range(256)) * 8,
    b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R 3 0 R]"
    b" /Count 2 >>\nendobj\n3 0 obj\n<< /Type /Pages /Kids [2 0 R] /Count 1 >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n",
])
def test_a_pdf_neither_reader_can_open_fails_in_plain_words(data: bytes) -> None:
    with pytest.raises(InvalidDocumentError) as info:
        parse(data)
    message = info.value.message
    assert message.startswith("the PDF is damaged (corrupt or truncated)")
    assert not any(raw in message for raw in ("FzError", "code=", "Error:", "PdfReadError", "format error"))

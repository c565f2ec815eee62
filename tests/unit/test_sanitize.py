"""Every parser's output is made storable in one place: NUL and other control characters,
unpaired surrogates and noncharacters never reach the database, in block texts, asset
descriptions or metadata, whichever parser produced them."""

from __future__ import annotations

import asyncio

import pytest

from ultimate_rag.adapters.parsers.isolation import ParseRunner, check_parsed
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.sanitize import clean_text
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument

DIRTY = "Alpha\x00beta\x01 gamma\x7f delta\x9f\ud800 end\ufdd0\uffff\U0010fffe"


@pytest.mark.parametrize(("raw", "clean"), [
    ("a\x00b", "ab"),
    ("line\r\nnext\rlast", "line\nnext\nlast"),
    ("tab\tstays\nnewline too", "tab\tstays\nnewline too"),
    ("end of page.\x0cNext page \x0bvt\x85nel", "end of page.\nNext page \nvt\nnel"),
    ("de\x0cne the e\x0bect", "dene the eect"),  # TeX ligature codes inside words: no line break
    (DIRTY, "Alphabeta gamma delta end"),
    ("emoji 😀 and CJK 港口 and é stay", "emoji 😀 and CJK 港口 and é stay"),
    ("\x1b[31mred\x1b[0m", "[31mred[0m"),
])
def test_clean_text(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_check_parsed_cleans_blocks_assets_and_metadata_and_drops_emptied_blocks() -> None:
    parsed = ParsedDocument(
        blocks=(Block("heading", "Title\x00", level=1), Block("paragraph", DIRTY), Block("paragraph", "\x00\x01"),
                Block("figure", "\x00", asset_ids=("a",)), Block("table", "| a |\n|---|\n| 1 |", caption="Ta\x00ble 1")),
        metadata={"title": "T\x00itle", "nested": {"k\x01": ["v\x00", ("w\ud800",)]}, "page_count": 2},
        assets=(ParsedAsset("a", b"png", "image/png", description="cap\x00tion\x07"),))
    clean = check_parsed(parsed, ParseLimits())
    assert [(b.kind, b.text) for b in clean.blocks] == [
        ("heading", "Title"), ("paragraph", "Alphabeta gamma delta end"), ("figure", ""), ("table", "| a |\n|---|\n| 1 |")]
    assert clean.blocks[-1].caption == "Table 1"
    assert clean.metadata == {"title": "Title", "nested": {"k": ["v", ("w",)]}, "page_count": 2}
    assert clean.assets[0].description == "caption" and clean.assets[0].data == b"png"


class _DirtyParser:  # a parser that is not built in runs in a thread; check_parsed still applies
    name = "dirty"
    version = "1"

    def accepts(self, source: DocumentSource, kind: str) -> bool:
        return True

    def parse(self, source: DocumentSource) -> ParsedDocument:
        return ParsedDocument(blocks=(Block("paragraph", DIRTY),))


def test_every_parse_result_is_cleaned_isolated_or_not() -> None:
    from .pdf_builders import make_pdf_with_controls

    source = DocumentSource(None, "x.pdf", "application/pdf", make_pdf_with_controls())
    from ultimate_rag.adapters.parsers.pdf import PdfParser

    for runner, parser in ((ParseRunner(isolate=False), _DirtyParser()), (ParseRunner(isolate=True), PdfParser())):
        parsed = asyncio.run(runner.parse(parser, source))
        text = parsed.text
        assert text and not any(ch in text for ch in "\x00\x01\x07\x1f\x7f\ud800")

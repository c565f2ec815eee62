"""The parser contract: every parser the registry knows, run as the worker runs it (in the isolated
parse child, through the checks every parse result passes), on a small real or generated sample
of its format, then on that sample cut in half, on garbage bytes, on garbage behind the format's
own signature, and on nothing at all.

A good file gives blocks whose texts are storable (no NUL or other control characters), whose
locators lie inside the document, the same result for the same bytes, and JSON metadata. A bad
file gives a parse result or an ``InvalidDocumentError`` with a readable reason: never another
exception, never a crashed parse child, never a parse that runs into the time limit.
A new parser without a sample here fails ``test_every_parser_has_a_sample``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.sanitize import clean_text
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource, ParsedDocument

from ..unit.office_builders import image_bytes, make_epub, make_odf, make_pptx, make_xlsx, scan_image
from ..unit.pdf_builders import tracemonkey_like

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
BLOCK_KINDS = {"heading", "paragraph", "code", "table", "list", "quote", "figure"}
TIME_LIMIT = 120.0  # far above any sample's parse: only a hang reaches it


@dataclass(frozen=True)
class Sample:
    filename: str
    build: Callable[[], bytes]
    signature: bytes = b""  # the format's magic bytes, put before garbage
    pages: int | None = None  # for paged formats: locators name no page past this
    text: bool = False  # a text format: line and character locators lie inside the decoded bytes


def _markdown() -> bytes:
    return (b"# Harbour guide\n\nThe ferry leaves from pier four.\n\n## Tides\n\n- high at dawn\n- low at noon\n\n"
            b"```python\nprint('tide')\n```\n\n> Check the chart.\n\n| pier | boats |\n|---|---|\n| 4 | 2 |\n")


def _image() -> bytes:
    return image_bytes(scan_image(["Invoice 4711 covers the heron ledger"], size=(1200, 300), top=60), "PNG")


SAMPLES: dict[str, Sample] = {
    "markdown": Sample("guide.md", _markdown, text=True),
    "text": Sample("notes.txt", lambda: "First line of notes.\nSecond line, 港口 and 항구.\n\nA new paragraph.\n".encode(),
                   text=True),
    "pdf": Sample("paper.pdf", lambda: tracemonkey_like()[0], signature=b"%PDF-1.7\n", pages=2),
    "docx": Sample("links.docx", lambda: (CORPUS / "docx" / "par-hlink-frags.docx").read_bytes(),
                   signature=b"PK\x03\x04"),
    "html": Sample("article.html", lambda: (CORPUS / "html" / "heise" / "source.html").read_bytes(),
                   signature=b"<!DOCTYPE html><html><body>"),
    "csv": Sample("countries.csv", lambda: b"\n".join((CORPUS / "csv" / "country-codes.csv").read_bytes()
                                                        .splitlines()[:30]) + b"\n", text=True),
    "image": Sample("scan.png", _image, signature=b"\x89PNG\r\n\x1a\n", pages=1),
    "pptx": Sample("slides.pptx", lambda: make_pptx([{"title": "Harbour", "body": ["Ferries", "Tides"],
                                                      "notes": "speak slowly"}, {"title": "Piers"}]),
                   signature=b"PK\x03\x04", pages=2),
    "xlsx": Sample("boats.xlsx", lambda: make_xlsx({"Boats": [["name", "pier"], ["Heron", 4], ["Gull", 2]]}),
                   signature=b"PK\x03\x04"),
    "epub": Sample("book.epub", lambda: make_epub([("One", "<h1>One</h1><p>The first chapter.</p>"),
                                                   ("Two", "<p>The second chapter.</p>")]),
                   signature=b"PK\x03\x04"),
    "odf": Sample("letter.odt", lambda: make_odf("text", "<text:h>Letter</text:h><text:p>Dear harbour master,</text:p>"),
                  signature=b"PK\x03\x04"),
}

PARSERS = [parser.name for parser in default_registry().parsers]


@pytest.fixture(scope="module")
def runner() -> ParseRunner:
    return ParseRunner(timeout_seconds=TIME_LIMIT)


def run(runner: ParseRunner, name: str, filename: str, data: bytes) -> ParsedDocument:
    parser = next(p for p in default_registry().parsers if p.name == name)
    return asyncio.run(runner.parse(parser, DocumentSource(None, filename, "application/octet-stream", data)))


def assert_well_formed(parsed: ParsedDocument, sample: Sample, data: bytes) -> None:
    json.dumps(parsed.metadata)  # storable as JSON, as it is stored
    text = data.decode("utf-8", errors="replace") if sample.text else ""
    for block in parsed.blocks:
        assert block.kind in BLOCK_KINDS, block
        assert clean_text(block.text) == block.text, f"unsanitised text in {block.text[:80]!r}"
        assert block.text.strip() or block.asset_ids, block
        for locator in (block.locator, *block.rows):
            json.dumps(locator.to_metadata())
            assert_inside(locator.to_metadata(), sample, text)
    asset_keys = {asset.locator_key for asset in parsed.assets}
    for block in parsed.blocks:
        assert set(block.asset_ids) <= asset_keys, (block.asset_ids, asset_keys)
    for asset in parsed.assets:
        assert asset.data and clean_text(asset.description) == asset.description


def assert_inside(metadata: dict[str, object], sample: Sample, text: str) -> None:
    locator = {k: v for k, v in metadata.items() if isinstance(v, int)}  # the positions; their names say which
    assert all(isinstance(metadata[k], int) for k in metadata if k.endswith(("page", "_start", "_end"))), metadata
    for start, end in (("page_start", "page_end"), ("line_start", "line_end"), ("char_start", "char_end"),
                       ("row_start", "row_end")):
        if start in locator and end in locator:
            assert locator[start] <= locator[end], locator
    for key in ("page", "page_start", "page_end", "line_start", "line_end", "row_start", "row_end"):
        if key in locator:
            assert locator[key] >= 1, locator
    if sample.pages is not None:
        for key in ("page", "page_start", "page_end"):
            if key in locator:
                assert locator[key] <= sample.pages, locator
    if sample.text:
        lines = text.count("\n") + 1
        for key in ("line_start", "line_end"):
            if key in locator:
                assert locator[key] <= lines, (locator, lines)
        for key in ("char_start", "char_end"):
            if key in locator:
                assert 0 <= locator[key] <= len(text), (locator, len(text))


def assert_refused_or_parsed(runner: ParseRunner, name: str, filename: str, data: bytes) -> None:
    """A parse result that keeps the contract, or a clear refusal: nothing else."""
    try:
        parsed = run(runner, name, filename, data)
    except InvalidDocumentError as exc:
        reason = str(exc)
        assert reason.strip(), f"{type(exc).__name__} without a reason"
        assert "crashed" not in reason and "longer than the limit" not in reason, reason
        return
    assert_well_formed(parsed, SAMPLES[name], data)


def test_every_parser_has_a_sample() -> None:
    assert set(PARSERS) == set(SAMPLES), "a parser without a sample (or a sample without a parser)"


@pytest.mark.parametrize("name", PARSERS)
def test_the_registry_picks_the_parser_for_its_sample(name: str) -> None:
    sample = SAMPLES[name]
    source = DocumentSource(None, sample.filename, "application/octet-stream", sample.build())
    assert default_registry().resolve(source).name == name


@pytest.mark.parametrize("name", PARSERS)
def test_a_sample_gives_sanitised_blocks_located_inside_the_document(runner: ParseRunner, name: str) -> None:
    sample = SAMPLES[name]
    data = sample.build()
    parsed = run(runner, name, sample.filename, data)
    assert parsed.blocks, "the sample's text was lost"
    assert_well_formed(parsed, sample, data)


@pytest.mark.parametrize("name", PARSERS)
def test_the_same_bytes_give_the_same_result(runner: ParseRunner, name: str) -> None:
    sample = SAMPLES[name]
    data = sample.build()
    first, second = run(runner, name, sample.filename, data), run(runner, name, sample.filename, data)
    assert dataclasses.asdict(first) == dataclasses.asdict(second)


@pytest.mark.parametrize("name", PARSERS)
def test_a_truncated_file_is_parsed_or_refused_clearly(runner: ParseRunner, name: str) -> None:
    sample = SAMPLES[name]
    data = sample.build()
    assert_refused_or_parsed(runner, name, sample.filename, data[: len(data) // 2])


@pytest.mark.parametrize("name", PARSERS)
def test_garbage_is_refused_clearly(runner: ParseRunner, name: str) -> None:
    sample = SAMPLES[name]
    garbage = random.Random(name).randbytes(4096)
    assert_refused_or_parsed(runner, name, sample.filename, garbage)
    assert_refused_or_parsed(runner, name, sample.filename, sample.signature + garbage)


@pytest.mark.parametrize("name", PARSERS)
def test_an_empty_file_is_handled(runner: ParseRunner, name: str) -> None:
    sample = SAMPLES[name]
    assert_refused_or_parsed(runner, name, sample.filename, b"")

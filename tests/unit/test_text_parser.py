"""Plain-text parsing: paragraphs with exact line and character locators."""

from __future__ import annotations

from ultimate_rag.adapters.parsers.text import PlainTextParser
from ultimate_rag.domain.models import DocumentSource


def parse(content: bytes, filename: str = "notes.txt"):
    return PlainTextParser().parse(DocumentSource(None, filename, "text/plain", content))


def test_identity() -> None:
    parser = PlainTextParser()
    assert (parser.name, parser.version) == ("text", "1.0.0")
    source = DocumentSource(None, "a.txt", "text/plain", b"x")
    assert parser.accepts(source, "text")
    assert not parser.accepts(source, "markdown")
    assert not parser.accepts(source, "binary:image/png")


def test_paragraphs_and_locators() -> None:
    text = "First line\nstill first.\n\n\n  Second para.\n   \nThird\n"
    doc = parse(text.encode())
    assert [b.text for b in doc.blocks] == ["First line\nstill first.", "  Second para.", "Third"]
    assert all(b.kind == "paragraph" for b in doc.blocks)
    lines = text.split("\n")
    for block in doc.blocks:
        loc = block.locator
        assert text[loc.char_start:loc.char_end] == block.text
        assert "\n".join(lines[loc.line_start - 1:loc.line_end]) == block.text
    assert [(b.locator.line_start, b.locator.line_end) for b in doc.blocks] == [(1, 2), (5, 5), (7, 7)]
    assert doc.metadata == {"encoding": "utf-8", "line_count": 7}


def test_offsets_refer_to_normalised_text() -> None:
    doc = parse(b"one\r\ntwo\r\n\r\nthree")
    assert [b.text for b in doc.blocks] == ["one\ntwo", "three"]
    assert (doc.blocks[1].locator.char_start, doc.blocks[1].locator.char_end) == (9, 14)
    assert doc.blocks[1].locator.line_start == 4
    assert doc.metadata["line_count"] == 4


def test_whitespace_only_gives_no_blocks() -> None:
    assert parse(b"").blocks == ()
    assert parse(b"  \n\n\t\n").blocks == ()


def test_legacy_encoding_is_decoded() -> None:
    text = "自然语言处理是人工智能的一个重要分支。\n\n它研究如何让计算机理解和生成人类语言。"
    doc = parse(text.encode("gb18030"))
    assert doc.metadata["encoding"] == "gb18030"
    assert [b.text for b in doc.blocks] == text.split("\n\n")

"""Markdown parsing: block kinds, faithful source text, line maps, front matter."""

from __future__ import annotations

from ultimate_rag.adapters.parsers.markdown import MarkdownParser
from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument

SOURCE = """---
title: Guide
tags: [a, b]
---
# Getting *started*

Intro paragraph
over two lines.

## Install

- step one
- step two

  more about two

```python
print("hi")
```

| name | value |
|------|-------|
| a    | 1     |
| b    | 2     |

> quoted
> text

    indented = True

Setext title
------------

### Deep `code` heading
Last words.
"""


def parse(text: str) -> ParsedDocument:
    return MarkdownParser().parse(DocumentSource(None, "guide.md", "text/markdown", text.encode()))


def by_kind(doc: ParsedDocument, kind: str) -> list[Block]:
    return [b for b in doc.blocks if b.kind == kind]


def test_identity() -> None:
    parser = MarkdownParser()
    assert (parser.name, parser.version) == ("markdown", "1.3.0")
    source = DocumentSource(None, "a.md", "text/markdown", b"x")
    assert parser.accepts(source, "markdown")
    assert not parser.accepts(source, "text")


def test_block_kinds_in_order() -> None:
    doc = parse(SOURCE)
    assert [b.kind for b in doc.blocks] == [
        "heading", "paragraph", "heading", "list", "code", "table", "quote", "code", "heading",
        "heading", "paragraph",
    ]


def test_headings_have_level_and_plain_text() -> None:
    doc = parse(SOURCE)
    assert [(b.level, b.text) for b in by_kind(doc, "heading")] == [
        (1, "Getting started"), (2, "Install"), (2, "Setext title"), (3, "Deep code heading"),
    ]


def test_block_text_is_sliced_from_source_lines() -> None:
    doc = parse(SOURCE)
    lines = SOURCE.split("\n")
    for block in doc.blocks:
        loc = block.locator
        assert loc.line_start is not None and loc.line_end is not None
        assert 1 <= loc.line_start <= loc.line_end
        if block.kind != "heading" and not block.text.startswith("```\n"):
            assert block.text == "\n".join(lines[loc.line_start - 1:loc.line_end])
            assert SOURCE[loc.char_start:loc.char_end] == block.text
    assert by_kind(doc, "paragraph")[0].text == "Intro paragraph\nover two lines."
    assert by_kind(doc, "paragraph")[0].locator.line_start == 7
    assert by_kind(doc, "list")[0].text == "- step one\n- step two\n\n  more about two"
    assert by_kind(doc, "quote")[0].text == "> quoted\n> text"


def test_code_keeps_fence_and_language() -> None:
    fenced, indented = by_kind(parse(SOURCE), "code")
    assert fenced.text == '```python\nprint("hi")\n```'
    assert indented.text == "```\nindented = True\n```"
    assert (indented.locator.line_start, indented.locator.line_end) == (29, 29)


def test_table_is_one_pipe_table_block() -> None:
    (table,) = by_kind(parse(SOURCE), "table")
    assert table.text.split("\n")[0] == "| name | value |"
    assert table.text.count("\n") == 3
    assert (table.locator.line_start, table.locator.line_end) == (21, 24)


def test_front_matter_goes_to_metadata_not_blocks() -> None:
    doc = parse(SOURCE)
    assert doc.metadata["front_matter"] == "title: Guide\ntags: [a, b]"
    assert all("tags:" not in b.text for b in doc.blocks)
    assert doc.blocks[0].locator.line_start == 5
    assert doc.metadata["title"] == "Getting started"
    assert doc.metadata["encoding"] == "utf-8"


def test_no_front_matter_and_no_title() -> None:
    doc = parse("Just text.\n\n---\n\nMore text.\n")
    assert "front_matter" not in doc.metadata
    assert "title" not in doc.metadata
    assert [b.text for b in doc.blocks] == ["Just text.", "More text."]


def test_empty_document_has_no_blocks() -> None:
    assert parse("").blocks == ()
    assert parse("---\na: 1\n---\n\n").blocks == ()


def test_crlf_source_and_cjk() -> None:
    doc = parse("# 标题\r\n\r\n第一段。\r\n")
    assert [(b.kind, b.text) for b in doc.blocks] == [("heading", "标题"), ("paragraph", "第一段。")]
    assert doc.blocks[1].locator.line_start == 3

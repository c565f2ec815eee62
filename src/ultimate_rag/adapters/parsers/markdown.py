"""Markdown parser built on markdown-it-py's block tokens.

Block text is sliced from the source lines (``token.map``) rather than re-rendered, so what a
chunk shows is what the author wrote; headings are the exception (their text without ``#``), and
MDX syntax (component tags, JSX comments, heading anchors, ``import``/``export``) is removed.
Tables cite their number in the document and each body row (its line and its row number, the
header being row 1), so a chunk of rows cites exactly those; the chunker repeats the header.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from ultimate_rag.domain.metadata import clean, document_properties
from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument, SourceLocator

from .detect import MARKDOWN_EXTENSIONS, decode_text
from .mdx import strip_mdx
from .table_captions import attach_captions
from .text import line_count

_FRONT_MATTER_END = re.compile(r"^(---|\.\.\.)\s*$")
_FRONT_MATTER_TITLE = re.compile(r"^title:\s*(\S.*?)\s*$")
MAX_FRONT_MATTER = 64 * 1024  # characters of front matter read as YAML
_OPEN_KINDS = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
}
_LEAF_KINDS = {"fence": "code", "code_block": "code", "html_block": "paragraph"}


class MarkdownParser:
    extensions = tuple(sorted(MARKDOWN_EXTENSIONS))  # what a 415 answer lists as supported
    name = "markdown"
    version = "1.3.0"

    def __init__(self) -> None:
        self._md = MarkdownIt("commonmark").enable("table")

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return detected_kind == "markdown"

    def parse(self, source: DocumentSource) -> ParsedDocument:
        text, encoding = decode_text(source.content)
        lines = text.split("\n")
        metadata: dict[str, Any] = {"encoding": encoding, "line_count": line_count(text)}
        body_start = _front_matter_end(lines)
        if body_start:
            metadata["front_matter"] = "\n".join(lines[1:body_start - 1])
        # Blank out the front matter instead of cutting it so token line numbers match the file;
        # MDX syntax is blanked keeping every line's length, so offsets match the file too.
        rest = strip_mdx("\n".join(lines[body_start:])).split("\n")
        tokens = self._md.parse("\n" * body_start + "\n".join(rest))
        clean = lines[:body_start] + rest
        blocks = _blocks(tokens, _SourceLines("\n".join(clean), clean, original=text))
        title = next((b.text for b in blocks if b.kind == "heading" and b.level == 1), None)
        if title is None and body_start:
            # Documentation sites keep the page title in the front matter (react.dev: no "# " line);
            # it becomes the level-1 heading, so every section's heading path starts with it.
            found = _front_matter_title(lines, body_start)
            if found is not None:
                title, line = found
                blocks.insert(0, Block(kind="heading", text=title, level=1,
                                       locator=SourceLocator(line_start=line, line_end=line)))
        if title:
            metadata["title"] = title
        if body_start:
            metadata |= _front_matter_metadata(metadata["front_matter"], title)
        return ParsedDocument(blocks=tuple(attach_captions(blocks)), metadata=metadata)


class _SourceLines:
    """Line-range slicing of the decoded source with character offsets."""

    def __init__(self, text: str, lines: list[str], original: str) -> None:
        self.text = text  # the file with MDX syntax blanked: same length, same line offsets
        self.original = original
        self.lines = lines
        self.offsets = [0] * (len(lines) + 1)
        for i, line in enumerate(lines):
            self.offsets[i + 1] = self.offsets[i] + len(line) + 1

    def locate(self, start: int, end: int) -> tuple[str, SourceLocator] | None:
        """Slice 0-based lines [start, end) without trailing blank lines; None if all blank."""
        end = min(end, len(self.lines))
        while end > start and not self.lines[end - 1].strip():
            end -= 1
        if end <= start:
            return None
        char_start = self.offsets[start]
        char_end = self.offsets[end - 1] + len(self.lines[end - 1])
        locator = SourceLocator(line_start=start + 1, line_end=end, char_start=char_start, char_end=char_end)
        text = self.text[char_start:char_end]
        if text != self.original[char_start:char_end]:  # MDX removed: drop its padding and blank lines
            text = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in text.split("\n"))).strip("\n")
        return text, locator


def _front_matter_end(lines: list[str]) -> int:
    """Number of lines taken by a leading ``---`` YAML block (0 when there is none)."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for i in range(1, len(lines)):
        if _FRONT_MATTER_END.match(lines[i]):
            return i + 1
    return 0


def _front_matter_metadata(text: str, title: str | None) -> dict[str, Any]:
    """The front matter's fields (YAML, safely loaded; not a mapping or not YAML: none) as
    ``front_matter_fields``, and the document properties they name as ``properties``: title,
    author (or authors), date (created), lastmod / updated / modified."""
    try:
        found = yaml.safe_load(text[:MAX_FRONT_MATTER])
    except yaml.YAMLError:
        return {}
    if not isinstance(found, dict):
        return {}
    fields = clean(found)
    modified = next((found[k] for k in ("lastmod", "updated", "modified") if found.get(k)), None)
    properties = document_properties(title=found.get("title") or title,
                                     author=found.get("author") or found.get("authors"),
                                     created=found.get("date"), modified=modified)
    return {"front_matter_fields": fields, "properties": properties}


def _front_matter_title(lines: list[str], end: int) -> tuple[str, int] | None:
    """The ``title:`` of the front matter (a plain or quoted YAML scalar) and its 1-based line."""
    for i in range(1, end - 1):
        match = _FRONT_MATTER_TITLE.match(lines[i])
        if match:
            value = match.group(1).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            value = " ".join(value.split())
            return (value, i + 1) if value else None
    return None


def _blocks(tokens: list[Token], source: _SourceLines) -> list[Block]:
    blocks: list[Block] = []
    tables = 0
    for i, token in enumerate(tokens):
        if token.level != 0 or token.map is None:
            continue
        located = source.locate(*token.map)
        if located is None:
            continue
        text, locator = located
        if token.type == "heading_open":
            heading = _inline_text(tokens[i + 1]) if i + 1 < len(tokens) else ""
            if heading:
                blocks.append(Block(kind="heading", text=heading, locator=locator, level=int(token.tag[1:])))
        elif token.type == "code_block":
            # Indented code loses its indentation when chunks are trimmed: show it fenced instead.
            blocks.append(Block(kind="code", text=f"```\n{token.content.rstrip()}\n```", locator=locator))
        elif token.type in _LEAF_KINDS:
            blocks.append(Block(kind=_LEAF_KINDS[token.type], text=text, locator=locator))
        elif token.type == "table_open":
            tables += 1
            blocks.append(_table(text, locator, tables))
        elif token.type in _OPEN_KINDS:
            blocks.append(Block(kind=_OPEN_KINDS[token.type], text=text, locator=locator))
    return blocks


def _table(text: str, locator: SourceLocator, number: int) -> Block:
    """A pipe table as written, citing the table (its number in the document) and each body row:
    its line, and its row number as the table counts them (the header is row 1)."""
    first = locator.line_start or 1
    body = text.split("\n")[2:]
    rows = tuple(SourceLocator(line_start=first + 2 + i, line_end=first + 2 + i, row_start=i + 2, row_end=i + 2,
                               table=number) for i in range(len(body)))
    located = replace(locator, table=number, row_start=2 if rows else None, row_end=len(body) + 1 if rows else None)
    return Block(kind="table", text=text, locator=located, rows=rows)


def _inline_text(token: Token) -> str:
    """Plain text of an inline token: emphasis and link markup dropped, code spans kept."""
    if token.type != "inline":
        return ""
    parts: list[str] = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return " ".join("".join(parts).split()) or token.content.strip()

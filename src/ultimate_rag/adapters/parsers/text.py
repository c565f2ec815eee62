"""Plain-text parser: paragraphs separated by blank lines, with exact line and character locators."""

from __future__ import annotations

from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument, SourceLocator

from .detect import TEXT_EXTENSIONS, decode_text


class PlainTextParser:
    extensions = tuple(sorted(TEXT_EXTENSIONS - {""}))  # and files without an extension
    name = "text"
    version = "1.0.0"

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return detected_kind == "text"

    def parse(self, source: DocumentSource) -> ParsedDocument:
        text, encoding = decode_text(source.content)
        return ParsedDocument(
            blocks=tuple(paragraph_blocks(text)),
            metadata={"encoding": encoding, "line_count": line_count(text)},
        )


def line_count(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def paragraph_blocks(text: str) -> list[Block]:
    """Split on blank lines. Each block's text is exactly ``text[char_start:char_end]``."""
    blocks: list[Block] = []
    start_line = start_char = 0  # start_line 0: not inside a paragraph
    offset = last_line = last_end = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            if not start_line:
                start_line, start_char = number, offset
            last_line, last_end = number, offset + len(line)
        elif start_line:
            blocks.append(_block(text, start_line, last_line, start_char, last_end))
            start_line = 0
        offset += len(line) + 1
    if start_line:
        blocks.append(_block(text, start_line, last_line, start_char, last_end))
    return blocks


def _block(text: str, line_start: int, line_end: int, char_start: int, char_end: int) -> Block:
    locator = SourceLocator(line_start=line_start, line_end=line_end,
                            char_start=char_start, char_end=char_end)
    return Block(kind="paragraph", text=text[char_start:char_end], locator=locator)

"""Structure-aware chunking under an exact token budget (the embedder's own tokenizer).

Blocks are grouped into sections by heading path and a chunk never crosses a section; within a
section units are packed greedily (see ``packing``), with trailing sentences of one chunk
repeated at the start of the next as overlap.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from uuid import UUID

from ultimate_rag.domain.ids import chunk_id
from ultimate_rag.domain.models import Block, Chunk, ParsedDocument, SourceLocator

from .packing import Packer, Unit


class StructuredChunker:
    """Implements the ``Chunker`` port. ``count_tokens`` must be the embedder's tokenizer, counting
    the whole input the model sees (special tokens and prefix included)."""

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self._count = count_tokens

    def split(self, parsed: ParsedDocument, *, document_id: UUID, knowledge_base_id: UUID,
              revision: int, chunk_size: int, overlap: int) -> list[Chunk]:
        packer = Packer(self._count, chunk_size, overlap)
        locate = _Locator(parsed.blocks)
        chunks: list[Chunk] = []
        for path, items in _sections(parsed.blocks):
            units = [unit for index, block in items for unit in packer.units(index, block)]
            for chosen, content, tokens in packer.pack(units):
                ordinal = len(chunks)
                chunks.append(Chunk(
                    id=chunk_id(document_id, revision, ordinal, content),
                    document_id=document_id,
                    knowledge_base_id=knowledge_base_id,
                    ordinal=ordinal,
                    content=content,
                    token_count=tokens,
                    heading_path=path,
                    locator=_union([locate(u) for u in chosen]),
                    metadata=_asset_metadata(parsed.blocks, chosen),
                ))
        return chunks


def _asset_metadata(blocks: Sequence[Block], units: Sequence[Unit]) -> dict[str, list[str]]:
    """The locator keys of the assets (images) that sit in the chunk's blocks, in order."""
    keys: list[str] = []
    for index in dict.fromkeys(u.block for u in units):
        keys.extend(k for k in blocks[index].asset_ids if k not in keys)
    return {"asset_keys": keys} if keys else {}


def _sections(blocks: Sequence[Block]) -> list[tuple[tuple[str, ...], list[tuple[int, Block]]]]:
    """Group non-heading blocks by heading path; a heading replaces same-or-deeper levels."""
    sections: list[tuple[tuple[str, ...], list[tuple[int, Block]]]] = []
    stack: list[tuple[int, str]] = []
    items: list[tuple[int, Block]] = []
    for index, block in enumerate(blocks):
        if block.kind == "heading":
            if items:
                sections.append((tuple(text for _, text in stack), items))
                items = []
            level = block.level or 1
            stack = [entry for entry in stack if entry[0] < level]
            stack.append((level, " ".join(block.text.split())))
        elif block.text.strip():
            items.append((index, block))
    if items:
        sections.append((tuple(text for _, text in stack), items))
    return sections


class _Locator:
    """Locators of units. A piece of a block gets its own lines and characters when the block's
    text is the exact source slice its locator spans; otherwise it gets the block's locator."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self._blocks = blocks
        self._newlines: dict[int, list[int]] = {}

    def __call__(self, unit: Unit) -> SourceLocator:
        block = self._blocks[unit.block]
        loc = block.locator
        if unit.start < 0 or loc.char_start is None or loc.char_end is None \
                or loc.char_end - loc.char_start != len(block.text):
            return loc
        line_start = line_end = None
        if loc.line_start is not None:
            newlines = self._newlines.get(unit.block)
            if newlines is None:
                newlines = [m.start() for m in re.finditer("\n", block.text)]
                self._newlines[unit.block] = newlines
            line_start = loc.line_start + bisect_left(newlines, unit.start)
            line_end = loc.line_start + bisect_left(newlines, max(unit.start, unit.end - 1))
        return SourceLocator(page=loc.page, line_start=line_start, line_end=line_end,
                             char_start=loc.char_start + unit.start, char_end=loc.char_start + unit.end)


def _union(locators: list[SourceLocator]) -> SourceLocator:
    def bound(values: list[int | None], pick: Callable[[list[int]], int]) -> int | None:
        known = [v for v in values if v is not None]
        return pick(known) if known else None

    pages = {loc.page for loc in locators}
    return SourceLocator(
        page=pages.pop() if len(pages) == 1 else None,
        line_start=bound([loc.line_start for loc in locators], min),
        line_end=bound([loc.line_end for loc in locators], max),
        char_start=bound([loc.char_start for loc in locators], min),
        char_end=bound([loc.char_end for loc in locators], max),
    )

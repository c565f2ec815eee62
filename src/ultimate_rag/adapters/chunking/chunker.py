"""Structure-aware chunking under an exact token budget (the embedder's own tokenizer).

Blocks are grouped into sections by heading path and a chunk never crosses a section (except
when a fragment under ``min_chars`` is merged into a neighbour); within a section units, the
section's heading lines first, are packed greedily (see ``packing``), with trailing sentences of
one chunk repeated at the start of the next as overlap. What is embedded for a chunk is its
heading context ("Title > Section") then its content, and that whole text fits the budget.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from uuid import UUID

from ultimate_rag.domain.embedding_text import embedding_text
from ultimate_rag.domain.identifiers import chunk_identifiers
from ultimate_rag.domain.ids import chunk_id
from ultimate_rag.domain.models import Block, Chunk, ParsedDocument, SourceLocator

from .packing import Packer
from .text_split import hard_split, table_header
from .units import Unit, join

MIN_CHUNK_CHARS = 15  # a shorter chunk is merged into a neighbour (unless the document is that short)
_MIN_CONTENT = 8  # tokens of content a chunk always has room for beside its heading context


@dataclass(slots=True)
class _Draft:
    path: tuple[str, ...]
    context: str  # the section's heading context, put before content that does not start with it
    units: list[Unit]
    content: str
    tokens: int


class StructuredChunker:
    """Implements the ``Chunker`` port. ``count_tokens`` must be the embedder's tokenizer, counting
    the whole input the model sees (special tokens and prefix included). A chunk shorter than
    ``min_chars`` is merged into a neighbour when the result fits the budget."""

    def __init__(self, count_tokens: Callable[[str], int], min_chars: int = MIN_CHUNK_CHARS) -> None:
        self._count = count_tokens
        self._min_chars = min_chars

    def split(self, parsed: ParsedDocument, *, document_id: UUID, knowledge_base_id: UUID,
              revision: int, chunk_size: int, overlap: int) -> list[Chunk]:
        probe = Packer(self._count, chunk_size, overlap)
        drafts: list[_Draft] = []
        for path, items in _sections(parsed.blocks):
            context = _context(probe, path)
            reserve = probe.cost(context) + 1 if context else 0
            packer = Packer(self._count, chunk_size, overlap, reserve=reserve,
                            embed=partial(embedding_text, path=path, context=context))
            units = [unit for index, block in items for unit in _units(packer, index, block)]
            drafts.extend(_Draft(path, context, chosen, content, tokens)
                          for chosen, content, tokens in packer.pack(units))
        drafts = _merge_small(drafts, self._min_chars, self._count, chunk_size)
        locate = _Locator(parsed.blocks)
        chunks: list[Chunk] = []
        for ordinal, draft in enumerate(drafts):
            embedded = embedding_text(draft.content, draft.path, draft.context)
            chunks.append(Chunk(
                id=chunk_id(document_id, revision, ordinal, draft.content),
                document_id=document_id,
                knowledge_base_id=knowledge_base_id,
                ordinal=ordinal,
                content=draft.content,
                token_count=draft.tokens,
                heading_path=draft.path,
                locator=_union([locate(u) for u in draft.units]),
                metadata=_asset_metadata(parsed.blocks, draft.units),
                context=embedded[:len(embedded) - len(draft.content)].rstrip("\n"),
                identifiers=tuple(chunk_identifiers(draft.content, draft.path)),
            ))
        return chunks


def _context(packer: Packer, path: tuple[str, ...]) -> str:
    """The headings joined by " > ", cut to at most half of what a chunk leaves after the fixed
    overhead (a long heading path must not crowd out the content)."""
    context = " > ".join(path)
    room = (packer.budget - _MIN_CONTENT) // 2
    if not context or room < 2:
        return ""
    if packer.cost(context) <= room:
        return context
    return hard_split(context, packer.cost, room, packer.guess)[0][0]


def _units(packer: Packer, index: int, block: Block) -> list[Unit]:
    units = packer.units(index, block)
    if block.kind == "heading":  # a heading is never carried over as overlap
        units = [replace(u, prose=False) for u in units]
    return units


def _merge_small(drafts: list[_Draft], min_chars: int, count: Callable[[str], int],
                 chunk_size: int) -> list[_Draft]:
    """Merge each chunk shorter than ``min_chars`` into the previous chunk, else the next, when
    the merged chunk fits; the merged chunk keeps the heading path of the longer one."""
    out = list(drafts)
    i = 0
    while i < len(out):
        if len(out) > 1 and len(out[i].content.strip()) < min_chars:
            for j in (i - 1, i + 1):
                if 0 <= j < len(out):
                    merged = _merged(out[min(i, j)], out[max(i, j)], count, chunk_size)
                    if merged is not None:
                        out[min(i, j):max(i, j) + 1] = [merged]
                        i = min(i, j) - 1
                        break
            else:  # both neighbours are full: take a unit over from one in the same section
                for j in (i - 1, i + 1):
                    if 0 <= j < len(out) and out[j].path == out[i].path:
                        pair = _shifted(out[min(i, j)], out[max(i, j)], j < i, count, chunk_size, min_chars)
                        if pair is not None:
                            out[min(i, j):max(i, j) + 1] = list(pair)
                            break
        i += 1
    return out


def _shifted(first: _Draft, second: _Draft, backward: bool, count: Callable[[str], int], chunk_size: int,
             min_chars: int) -> tuple[_Draft, _Draft] | None:
    """Move the last unit of ``first`` to ``second`` (``backward``) or the first unit of ``second``
    to ``first``; None unless both still fit and neither is under ``min_chars``. Overlap that the
    move would duplicate is dropped."""
    head = list(first.units)
    tail = [u for u in second.units if not u.overlap]
    if backward:
        tail.insert(0, head.pop())
    else:
        head.append(tail.pop(0))
    drafts = []
    for units, like in ((head, first), (tail, second)):
        if not any(not u.overlap for u in units):
            return None
        content = join(units)
        tokens = count(embedding_text(content, like.path, like.context))
        if tokens > chunk_size or len(content.strip()) < min_chars:
            return None
        drafts.append(_Draft(like.path, like.context, units, content, tokens))
    return drafts[0], drafts[1]


def _merged(first: _Draft, second: _Draft, count: Callable[[str], int], chunk_size: int) -> _Draft | None:
    units = first.units + [u for u in second.units if not u.overlap]
    content = join(units)
    keep = first if len(first.content) >= len(second.content) else second
    tokens = count(embedding_text(content, keep.path, keep.context))
    if tokens > chunk_size:
        return None
    return _Draft(keep.path, keep.context, units, content, tokens)


def _asset_metadata(blocks: Sequence[Block], units: Sequence[Unit]) -> dict[str, list[str]]:
    """The locator keys of the assets (images) that sit in the chunk's blocks, in order."""
    keys: list[str] = []
    for index in dict.fromkeys(u.block for u in units):
        keys.extend(k for k in blocks[index].asset_ids if k not in keys)
    return {"asset_keys": keys} if keys else {}


def _sections(blocks: Sequence[Block]) -> list[tuple[tuple[str, ...], list[tuple[int, Block]]]]:
    """Group blocks by heading path; a heading replaces same-or-deeper levels and starts a
    section, unless the section so far has only headings: consecutive headings open one section
    together, under the path of the last."""
    sections: list[tuple[tuple[str, ...], list[tuple[int, Block]]]] = []
    stack: list[tuple[int, str]] = []
    items: list[tuple[int, Block]] = []
    body = False
    for index, block in enumerate(blocks):
        if not block.text.strip():
            continue
        if block.kind == "heading":
            if body:
                sections.append((tuple(text for _, text in stack), items))
                items, body = [], False
            level = block.level or 1
            stack = [entry for entry in stack if entry[0] < level]
            stack.append((level, " ".join(block.text.split())))
        else:
            body = True
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
        if block.rows and unit.start >= 0:
            return self._rows(unit, block)
        if unit.start < 0 or loc.char_start is None or loc.char_end is None \
                or loc.char_end - loc.char_start != len(block.text):
            return loc
        line_start = line_end = None
        if loc.line_start is not None:
            newlines = self._newlines_of(unit.block, block.text)
            line_start = loc.line_start + bisect_left(newlines, unit.start)
            line_end = loc.line_start + bisect_left(newlines, max(unit.start, unit.end - 1))
        return replace(loc, line_start=line_start, line_end=line_end,
                       char_start=loc.char_start + unit.start, char_end=loc.char_start + unit.end)

    def _rows(self, unit: Unit, block: Block) -> SourceLocator:
        """A table's unit cites the data rows its lines span (the header lines are not rows)."""
        newlines = self._newlines_of(unit.block, block.text)
        skip = table_header(block.text.split("\n", 2)[:2])
        first = bisect_left(newlines, unit.start) - skip
        last = bisect_left(newlines, max(unit.start, unit.end - 1)) - skip
        rows = block.rows[max(0, first):max(0, last + 1)]
        return _union(list(rows)) if rows else block.locator

    def _newlines_of(self, index: int, text: str) -> list[int]:
        newlines = self._newlines.get(index)
        if newlines is None:
            newlines = [m.start() for m in re.finditer("\n", text)]
            self._newlines[index] = newlines
        return newlines


def _union(locators: list[SourceLocator]) -> SourceLocator:
    def bound(values: list[int | None], pick: Callable[[list[int]], int]) -> int | None:
        known = [v for v in values if v is not None]
        return pick(known) if known else None

    pages = {p for loc in locators for p in (loc.page, loc.page_start, loc.page_end) if p is not None}
    spans = len(pages) > 1  # a chunk across a page break cites the range, never nothing
    tables = {loc.table for loc in locators if loc.table is not None}
    # rows of two tables make no one range: the paragraphs (or page) locate such a chunk
    rows = locators if len(tables) <= 1 else []
    return SourceLocator(
        page=next(iter(pages)) if len(pages) == 1 else None,
        page_start=min(pages) if spans else None,
        page_end=max(pages) if spans else None,
        line_start=bound([loc.line_start for loc in locators], min),
        line_end=bound([loc.line_end for loc in locators], max),
        char_start=bound([loc.char_start for loc in locators], min),
        char_end=bound([loc.char_end for loc in locators], max),
        row_start=bound([loc.row_start for loc in rows], min),
        row_end=bound([loc.row_end for loc in rows], max),
        bbox=_box_union(locators) if len(pages) == 1 else None,
        table=next(iter(tables)) if len(tables) == 1 else None,
        paragraph_start=bound([loc.paragraph_start for loc in locators], min),
        paragraph_end=bound([loc.paragraph_end for loc in locators], max),
        anchor=next((loc.anchor for loc in locators if loc.anchor), None),  # where the chunk starts
    )


def _box_union(locators: list[SourceLocator]) -> tuple[int, int, int, int] | None:
    """The box around the OCR text of a chunk on one page (parts without a box, such as the
    page image's placeholder, add nothing); None when no part has one."""
    known = [loc.bbox for loc in locators if loc.bbox is not None]
    if not known:
        return None
    return (min(b[0] for b in known), min(b[1] for b in known), max(b[2] for b in known), max(b[3] for b in known))

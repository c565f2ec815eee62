"""Structure-aware chunking under an exact token budget.

Blocks are grouped into sections by their heading path; a chunk never crosses a section. Within
a section, units (whole blocks when they fit, else sentences, code/table parts or hard-split
pieces) are packed greedily. Packing uses per-unit token estimates (each unit is counted once);
every finished chunk is then counted exactly and shrunk if the estimate was optimistic, so
``token_count`` is always the embedder's own count and never exceeds ``chunk_size``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from uuid import UUID

from ultimate_rag.domain.ids import chunk_id
from ultimate_rag.domain.models import Block, Chunk, ParsedDocument, SourceLocator

from .text_split import code_wrapper, hard_split, split_sentences, table_header

_CHARS_PER_TOKEN_GUESS = 4
_STRUCTURED = ("code", "table")


@dataclass(frozen=True, slots=True)
class _Unit:
    text: str
    cost: int  # tokens beyond the tokenizer's fixed overhead
    block: int  # index of the source block
    prose: bool  # sentences of it may be carried over as overlap
    whole: bool  # the entire block, not a piece of it
    gap: str = ""  # whitespace that followed this piece inside its block
    overlap: bool = False


class StructuredChunker:
    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self._count = count_tokens

    def split(self, parsed: ParsedDocument, *, document_id: UUID, knowledge_base_id: UUID,
              revision: int, chunk_size: int, overlap: int) -> list[Chunk]:
        packer = _Packer(self._count, chunk_size, overlap)
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
                    locator=_union([parsed.blocks[u.block].locator for u in chosen]),
                    metadata={},
                ))
        return chunks


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


def _join(units: Sequence[_Unit]) -> str:
    parts: list[str] = []
    for i, unit in enumerate(units):
        if i:
            prev = units[i - 1]
            same = prev.block == unit.block and prev.prose and not prev.whole
            parts.append(prev.gap if same else "\n\n")
        parts.append(unit.text)
    return "".join(parts)


class _Packer:
    """Per-call state: the tokenizer, its fixed overhead and the budgets."""

    def __init__(self, count: Callable[[str], int], chunk_size: int, overlap: int) -> None:
        self.count = count
        self.overhead = count("")
        if chunk_size <= self.overhead:
            raise ValueError(f"chunk_size {chunk_size} leaves no room beside the tokenizer's "
                             f"{self.overhead} fixed tokens")
        self.limit = chunk_size
        self.budget = chunk_size - self.overhead
        self.overlap = max(0, overlap)
        self.guess = max(1, self.budget * _CHARS_PER_TOKEN_GUESS)

    def cost(self, text: str) -> int:
        return max(0, self.count(text) - self.overhead)

    # -- units -----------------------------------------------------------------------------

    def units(self, index: int, block: Block) -> list[_Unit]:
        structured = block.kind in _STRUCTURED
        text = block.text.rstrip().lstrip("\n") if structured else block.text.strip()
        if not text:
            return []
        n = self.count(text)
        if n <= self.limit:
            return [_Unit(text, max(0, n - self.overhead), index, prose=not structured, whole=True)]
        if structured:
            parts = self._split_code(text) if block.kind == "code" else self._split_table(text)
            return [_Unit(p, max(0, m - self.overhead), index, prose=False, whole=False) for p, m in parts]
        units: list[_Unit] = []
        for sentence, gap in split_sentences(text):
            n = self.count(sentence)
            pieces = [(sentence, gap, n)] if n <= self.limit else hard_split(
                sentence, self.count, self.limit, self.guess)
            last = len(pieces) - 1
            for k, (piece, piece_gap, m) in enumerate(pieces):
                units.append(_Unit(piece, max(0, m - self.overhead), index, prose=True, whole=False,
                                   gap=gap if k == last else piece_gap))
        return units

    def _split_code(self, text: str) -> list[tuple[str, int]]:
        head, body, tail = code_wrapper(text)
        return self._split_lines(body, lambda part: "\n".join(head + part + tail))

    def _split_table(self, text: str) -> list[tuple[str, int]]:
        lines = text.split("\n")
        header = lines[:table_header(lines)]
        if self.count("\n".join(header)) > self.overhead + self.budget // 2:
            header = []  # a header that big would leave parts with hardly any rows
        return self._split_lines(lines[len(header):], lambda part: "\n".join(header + part))

    def _split_lines(self, lines: list[str], wrap: Callable[[list[str]], str]) -> list[tuple[str, int]]:
        """Greedy line packing; each part is wrapped (fence / table header) and counted exactly."""
        base = self.count(wrap([]))
        if base >= self.limit:
            wrap, base = "\n".join, self.overhead
        queue = deque((line, self.cost(line)) for line in lines)
        parts: list[tuple[str, int]] = []
        while queue:
            part: list[tuple[str, int]] = [queue.popleft()]
            estimate = base + part[0][1]
            while queue and estimate + queue[0][1] <= self.limit:
                estimate += queue[0][1]
                part.append(queue.popleft())
            while True:
                text = wrap([line for line, _ in part])
                n = self.count(text)
                if n <= self.limit:
                    parts.append((text, n))
                    break
                if len(part) > 1:
                    queue.appendleft(part.pop())
                    continue
                measure = lambda s: self.count(wrap([s]))  # noqa: E731
                pieces = hard_split(part[0][0], measure, self.limit, self.guess)
                queue.extendleft(reversed([(p, max(0, m - base)) for p, _, m in pieces]))
                break
        return parts

    # -- packing ---------------------------------------------------------------------------

    def pack(self, units: Sequence[_Unit]) -> list[tuple[list[_Unit], str, int]]:
        """Greedy packing of one section; each result is (units, content, exact token count)."""
        out: list[tuple[list[_Unit], str, int]] = []
        queue = deque(units)
        current: list[_Unit] = []
        estimate = fresh = 0
        while True:
            if queue and (not fresh or estimate + queue[0].cost <= self.budget):
                unit = queue.popleft()
                if not fresh:  # only overlap so far: drop its oldest sentences until the unit fits
                    while current and estimate + unit.cost > self.budget:
                        estimate -= current.pop(0).cost
                current.append(unit)
                estimate += unit.cost
                fresh += 1
                continue
            if not fresh:
                return out
            out.append(self._emit(current, queue))
            current = self._overlap(out[-1][0]) if queue else []
            estimate, fresh = sum(u.cost for u in current), 0

    def _emit(self, current: list[_Unit], queue: deque[_Unit]) -> tuple[list[_Unit], str, int]:
        """Count the chunk exactly; shed overlap, then trailing units, until it fits."""
        units = list(current)
        while True:
            content = _join(units)
            n = self.count(content)
            if n <= self.limit or len(units) == 1:
                return units, content, n
            if units[0].overlap:
                units.pop(0)
            else:
                queue.appendleft(units.pop())

    def _overlap(self, units: list[_Unit]) -> list[_Unit]:
        """Trailing sentences of a chunk, up to ``overlap`` tokens, marked as overlap."""
        picked: list[_Unit] = []
        total = 0
        for unit in reversed(units):
            if not unit.prose or self.overlap == 0:
                break
            if unit.whole:
                pieces = [(s, g, None) for s, g in split_sentences(unit.text)]
            else:
                pieces = [(unit.text, unit.gap, unit.cost)]
            for text, gap, cost in reversed(pieces):
                cost = self.cost(text) if cost is None else cost
                if total + cost > self.overlap:
                    return picked
                picked.insert(0, replace(unit, text=text, gap=gap, cost=cost, whole=False, overlap=True))
                total += cost
        return picked

"""Units and greedy packing for the chunker.

A unit is a whole block when it fits the budget, else a sentence, a hard-split piece of one, or a
line-split part of a code block or table. Each unit is counted once; packing sums those counts
as an estimate and every finished chunk is then counted exactly and shrunk if the estimate was
optimistic, so a chunk's token count is the embedder's own and never exceeds the budget.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from ultimate_rag.domain.models import Block

from .tables import table_units
from .text_split import code_wrapper, hard_split, split_sentences
from .units import Unit, join

_CHARS_PER_TOKEN_GUESS = 4
_MIN_ROOM = 8  # tokens beside the fixed overhead; any single character must fit
_STRUCTURED = ("code", "table")

Packed = tuple[list["Unit"], str, int]


def fixed_overhead(count: Callable[[str], int]) -> int:
    """Tokens a text costs before its own (special tokens, "passage: " prefix).

    Starts from ``count("")``; some tokenizers encode empty text with a placeholder token, which
    would make every piece look one token cheaper than it is, so the overhead implied by two
    words and their join is taken when smaller (over-estimating piece costs is the safe side).
    """
    implied = count("alpha") + count("beta") - count("alpha beta")
    return max(0, min(count(""), implied))


class Packer:
    """Per-call state: the tokenizer, its fixed overhead and the budgets."""

    def __init__(self, count: Callable[[str], int], chunk_size: int, overlap: int, *, reserve: int = 0,
                 embed: Callable[[str], str] | None = None) -> None:
        """``reserve``: tokens kept free for the heading context that ``embed`` puts before a
        chunk's content; the exact count of ``embed(content)`` never exceeds ``chunk_size``."""
        self.count = count
        self.overhead = fixed_overhead(count)
        if chunk_size < self.overhead + _MIN_ROOM:
            raise ValueError(f"chunk_size {chunk_size} is too small: the tokenizer itself takes "
                             f"{self.overhead} tokens and at least {_MIN_ROOM} more are needed")
        self.total = chunk_size
        self.limit = chunk_size - reserve
        self.budget = self.limit - self.overhead
        self.embed = embed or (lambda text: text)
        self.overlap = max(0, overlap)
        self.guess = max(1, self.budget * _CHARS_PER_TOKEN_GUESS)

    def cost(self, text: str) -> int:
        return max(0, self.count(text) - self.overhead)

    def measure(self, text: str) -> int:
        """Exact count, or limit + 1 without counting for text far too long to fit (a 1 MB
        paragraph would otherwise be tokenized whole just to learn that it must be split)."""
        return self.count(text) if len(text) <= 4 * self.guess else self.limit + 1

    # -- units -----------------------------------------------------------------------------

    def units(self, index: int, block: Block) -> list[Unit]:
        structured = block.kind in _STRUCTURED
        text = block.text.rstrip().lstrip("\n") if structured else block.text.strip()
        if not text:
            return []
        caption = " ".join(block.caption.split()) if block.kind == "table" else ""
        shown = f"{caption}\n\n{text}" if caption else text
        n = self.measure(shown)
        lead = len(block.text) - len(block.text.lstrip("\n" if structured else None))
        if n <= self.limit:
            return [Unit(shown, max(0, n - self.overhead), index, prose=not structured, whole=True,
                         start=lead, end=lead + len(text))]
        if block.kind == "table":
            return table_units(self, index, text, lead, caption)
        if structured:
            return self._code_units(index, text, lead)
        units: list[Unit] = []
        for sentence, gap, at in split_sentences(text):
            n = self.measure(sentence)
            pieces = [(sentence, gap, n, 0)] if n <= self.limit else hard_split(
                sentence, self.count, self.limit, self.guess)
            last = len(pieces) - 1
            for k, (piece, piece_gap, m, offset) in enumerate(pieces):
                start = lead + at + offset
                units.append(Unit(piece, max(0, m - self.overhead), index, prose=True, whole=False,
                                  gap=gap if k == last else piece_gap, start=start, end=start + len(piece)))
        return units

    def _code_units(self, index: int, text: str, lead: int) -> list[Unit]:
        """Code split by lines, each part re-fenced."""
        lines = text.split("\n")
        head, body, tail = code_wrapper(text)
        return self.line_units(index, lines, len(head), body, lambda rows: "\n".join(head + rows + tail), lead)

    def line_units(self, index: int, lines: list[str], skip: int, body: list[str],
                   wrap: Callable[[list[str]], str], lead: int) -> list[Unit]:
        """Units of ``body`` (the block's lines from ``skip`` on, up to any closing lines), each
        part wrapped by ``wrap``; spans as in the block's text (``lines``)."""
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line) + 1)
        total = offsets[-1] - 1
        units = []
        for part, n, first, last in self.split_lines(body, wrap):
            if not part.strip():
                continue
            # The first part also spans the lines above it, the last the lines below it.
            start = 0 if first == 0 else offsets[first + skip]
            end = total if last == len(body) - 1 else offsets[last + skip + 1] - 1
            units.append(Unit(part, max(0, n - self.overhead), index, prose=False, whole=False,
                              start=lead + start, end=lead + end))
        return units

    def split_lines(self, lines: list[str],
                     wrap: Callable[[list[str]], str]) -> list[tuple[str, int, int, int]]:
        """Greedy line packing: (wrapped part, exact count, first line, last line) per part."""
        base = self.count(wrap([]))
        if base >= self.limit:
            wrap, base = "\n".join, self.overhead
        queue = deque((line, self.cost(line), i) for i, line in enumerate(lines))
        parts: list[tuple[str, int, int, int]] = []
        while queue:
            part = [queue.popleft()]
            estimate = base + part[0][1]
            while queue and estimate + queue[0][1] <= self.limit:
                estimate += queue[0][1]
                part.append(queue.popleft())
            while True:
                text = wrap([line for line, _, _ in part])
                n = self.count(text)
                if n <= self.limit:
                    parts.append((text, n, part[0][2], part[-1][2]))
                    break
                if len(part) > 1:
                    queue.appendleft(part.pop())
                    continue
                line, _, origin = part[0]
                indent = line[:len(line) - len(line.lstrip())]
                pieces = hard_split(line, lambda s: self.count(wrap([indent + s])),  # noqa: B023
                                    self.limit, self.guess)
                queue.extendleft(reversed([(indent + p, max(0, m - base), origin) for p, _, m, _ in pieces]))
                break
        return parts

    # -- packing ---------------------------------------------------------------------------

    def pack(self, units: Sequence[Unit]) -> list[Packed]:
        """Greedy packing of one section; each result is (units, content, exact token count)."""
        out: list[Packed] = []
        queue = deque(units)
        current: list[Unit] = []
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
            current = self._overlap(out[-1][0], self._tail_room(queue)) if queue else []
            estimate, fresh = sum(u.cost for u in current), 0

    def _tail_room(self, queue: deque[Unit]) -> int:
        """The overlap the next chunk may carry: the usual ``overlap``, or, when what is left of
        the section fits one chunk, whatever room that last chunk leaves, so that the section's end
        is embedded with the sentences before it rather than as a short fragment (measured: short
        tail fragments outrank whole paragraphs on dense similarity; bench/RESULTS.md). No overlap
        asked (0): none here either."""
        left = sum(u.cost for u in queue)
        return max(self.overlap, self.budget - left) if self.overlap and left <= self.budget else self.overlap

    def _emit(self, current: list[Unit], queue: deque[Unit]) -> Packed:
        """Count the chunk exactly; shed overlap, then trailing units, until it fits."""
        units = list(current)
        while True:
            content = join(units)
            n = self.count(self.embed(content))
            if n <= self.total or len(units) == 1:
                return units, content, n
            if units[0].overlap:
                units.pop(0)
            else:
                queue.appendleft(units.pop())

    def _overlap(self, units: list[Unit], room: int) -> list[Unit]:
        """Trailing sentences of a chunk, up to ``room`` tokens, marked as overlap."""
        picked: list[Unit] = []
        total = 0
        for unit in reversed(units):
            if not unit.prose or room == 0:
                break
            pieces: list[tuple[str, str, int | None, int]]
            if unit.whole:
                pieces = [(s, g, None, unit.start + at) for s, g, at in split_sentences(unit.text)]
            else:
                pieces = [(unit.text, unit.gap, unit.cost, unit.start)]
            for text, gap, cost, start in reversed(pieces):
                cost = self.cost(text) if cost is None else cost
                if total + cost > room:
                    return picked
                picked.insert(0, replace(unit, text=text, gap=gap, cost=cost, whole=False, overlap=True,
                                         start=start, end=start + len(text)))
                total += cost
        return picked

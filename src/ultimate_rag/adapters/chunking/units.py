"""The chunker's unit of packing: a block, or a piece of one, with its token cost and span."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Unit:
    text: str
    cost: int  # tokens beyond the tokenizer's fixed overhead
    block: int  # index of the source block
    prose: bool  # sentences of it may be carried over as overlap
    whole: bool  # the entire block, not a piece of it
    gap: str = ""  # whitespace that followed this piece inside its block
    overlap: bool = False
    start: int = -1  # span of the unit in its block's text; -1: the whole block
    end: int = -1


def join(units: Sequence[Unit]) -> str:
    """Pieces of one block keep their original spacing; blocks are separated by a blank line."""
    parts: list[str] = []
    for i, unit in enumerate(units):
        if i:
            prev = units[i - 1]
            same = prev.block == unit.block and prev.prose and not prev.whole
            parts.append(prev.gap if same else "\n\n")
        parts.append(unit.text)
    return "".join(parts)

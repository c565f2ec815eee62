"""Tables too big for one chunk: split by rows, every part naming its columns.

A table with a header row is cut between rows and every part repeats the header. A row that does
not fit beside the header (or every row, when the header alone would take more than half the
budget) is written as a record instead, one ``column: value`` line per non-empty cell, and cut
between those lines when it is still too big, each piece starting with the row's first value,
so no piece of a row is ever without its column names. A table without a header row is cut
between lines, its first line repeated. A table's caption (``Block.caption``) is repeated above
the header of every part and record, so later rows still say which table they are from; a caption
longer than a quarter of the budget is written in full once, and cut to that quarter where repeated.
"""

from __future__ import annotations

import re
from itertools import zip_longest
from typing import TYPE_CHECKING

from .text_split import hard_split, table_header
from .units import Unit

if TYPE_CHECKING:
    from .packing import Packer

_CELL_BORDER = re.compile(r"(?<!\\)\|")


def table_cells(line: str) -> list[str]:
    """Cells of a pipe-table line (``\\|`` is a literal bar inside a cell)."""
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [cell.strip().replace("\\|", "|") for cell in _CELL_BORDER.split(text)]


def table_units(packer: Packer, index: int, text: str, lead: int, caption: str = "") -> list[Unit]:
    lines = text.split("\n")
    skip = table_header(lines)
    titled, units = _caption(packer, index, caption)
    head, body = titled + lines[:skip], lines[skip:]
    if skip < 2:  # no header row: cut by lines, the first line repeated
        return units + packer.line_units(index, lines, skip, body, lambda rows: "\n".join(head + rows), lead)
    names = table_cells(lines[0])
    base = packer.count("\n".join(head))
    as_table = base - packer.overhead <= packer.budget // 2
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    run: list[int] = []  # consecutive rows that fit beside the header

    def flush() -> None:
        for part, n, a, b in packer.split_lines([body[i] for i in run], lambda rows: "\n".join(head + rows)):
            first, last = run[a], run[b]
            start = 0 if first == 0 else offsets[first + skip]
            units.append(Unit(part, max(0, n - packer.overhead), index, prose=False, whole=False,
                              start=lead + start, end=lead + offsets[last + skip + 1] - 1))
        run.clear()

    for i, row in enumerate(body):
        if as_table and base + packer.cost(row) <= packer.limit:
            run.append(i)
            continue
        flush()
        start, end = offsets[i + skip], offsets[i + skip + 1] - 1
        units.extend(_record_units(packer, index, names, table_cells(row), lead + start, lead + end, titled))
    flush()
    return units


def _caption(packer: Packer, index: int, caption: str) -> tuple[list[str], list[Unit]]:
    """The lines repeated above every part (the caption and a blank line), and the units that
    write a caption too long to repeat in full once (it is then repeated cut)."""
    if not caption:
        return [], []
    room = packer.budget // 4
    if packer.cost(caption) <= room:
        return [caption, ""], []
    pieces = hard_split(caption, packer.cost, packer.budget, packer.guess)
    whole = [Unit(piece, n, index, prose=False, whole=False, start=-1, end=-1) for piece, _, n, _ in pieces]
    return [hard_split(caption, packer.cost, room, packer.guess)[0][0], ""], whole


def _record_units(packer: Packer, index: int, names: list[str], cells: list[str], start: int,
                  end: int, titled: list[str]) -> list[Unit]:
    """One ``column: value`` line per non-empty cell; every piece starts with the caption lines
    (``titled``) and the first line (the row's key), and a value too long for one piece is cut
    with its column name on every part."""
    pairs = [(name or f"column {k + 1}", value)
             for k, (name, value) in enumerate(zip_longest(names, cells, fillvalue="")) if value]
    if not pairs:
        return []
    title = packer.cost("\n".join(titled)) if titled else 0
    limit_of_all = packer.limit - title
    key_limit = (limit_of_all + packer.overhead) // 2  # the key and any one line fit together
    lines: list[str] = []
    for label, value in pairs:
        prefix = f"{lines[0]}\n" if lines else ""
        limit = limit_of_all if lines else key_limit
        line = f"{label}: {value}"
        if packer.count(prefix + line) <= limit:
            lines.append(line)
            continue

        def cost(s: str, p: str = prefix, lb: str = label) -> int:
            return packer.count(f"{p}{lb}: {s}")

        pieces = hard_split(value, cost, limit, packer.guess)
        lines.extend(f"{label}: {piece}" for piece, _, _, _ in pieces)
    key = "\n".join([*titled, lines[0]])
    parts = packer.split_lines(lines[1:], lambda rest: "\n".join([key, *rest])) if len(lines) > 1 else [
        (key, packer.count(key), 0, 0)]
    return [Unit(part, max(0, n - packer.overhead), index, prose=False, whole=False, start=start, end=end)
            for part, n, _, _ in parts if part.strip()]

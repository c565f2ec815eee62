"""Unruled tables: text aligned in columns without ruling lines (pdf_tables.py).

A run of lines, top to bottom and close together, in which at least ``MIN_ROWS`` lines have two
or more spans (text separated by a gap of a font size or more) is a candidate. Its columns are
the stretches of the page its spans cover, merged where they overlap; a line's spans go to the
column they lie in. The run is a table when it has at least two columns, most of its multi-span
lines use two or more of them, its cells are short (half of them at most 30 characters, 80 % at
most 60), and it is not prose in two columns (two columns whose lines are both wide). A line with
text in later columns only continues the row above (a cell's text wrapped onto a second line).
"""

from __future__ import annotations

from statistics import median

from .pdf_lines import Line, Span
from .pdf_tables import cell_text, is_number, make_table
from .pdf_text import Item

MIN_ROWS = 3
MAX_CELL_CHARS = 60  # most cells of a table are shorter than this
MEDIAN_CELL_CHARS = 30  # and half of them shorter than this (a column of prose has ~50 a line)
ROW_GAP = 1.6  # font sizes between consecutive lines of one table, at most


def unruled_tables(lines: list[Line], page: int, width: float,
                   trusted: bool = False) -> tuple[list[Item], list[Line]]:
    """The unruled tables among ``lines`` and the lines left; ``trusted``: the layout model says the
    lines are a table (pdf_layout.py), so two rows suffice and the prose guards are off."""
    ordered = sorted(lines, key=lambda ln: (ln.y0, ln.x0))
    items: list[Item] = []
    taken: set[int] = set()
    run: list[Line] = []

    def close() -> None:
        item = _table(run, page, width, trusted)
        if item is not None:
            items.append(item)
            taken.update(id(ln) for ln in run)
        run.clear()

    for line in ordered:
        if run and (line.y0 - max(ln.y1 for ln in run) > ROW_GAP * max(line.size, 1.0)
                    or abs(line.size - run[-1].size) > 0.35 * max(line.size, run[-1].size, 1.0)):
            close()
        if len(line.spans) >= 2 or run:
            run.append(line)
    close()
    return items, [ln for ln in lines if id(ln) not in taken]


def _table(run: list[Line], page: int, width: float, trusted: bool) -> Item | None:
    while run and len(run[-1].spans) < 2:
        run.pop()  # a paragraph after the table is not part of it
    multi = [ln for ln in run if len(ln.spans) >= 2]
    least = 2 if trusted else MIN_ROWS
    if len(multi) < least:
        return None
    columns = _columns([span for ln in multi for span in ln.spans])
    if len(columns) < 2:
        return None
    spans = [span for ln in run for span in ln.spans]
    if not trusted and (median(len(s.text) for s in spans) > MEDIAN_CELL_CHARS or sum(
            len(s.text) <= MAX_CELL_CHARS for s in spans) < 0.8 * len(spans)):
        return None  # lines of prose (a justified line's wide spaces make spans too)
    if not trusted and len(columns) == 2 and width > 0 and all(
            median(s.x1 - s.x0 for s in spans if _column(columns, s) == k) > 0.25 * width for k in (0, 1)):
        return None  # prose in two columns
    rows: list[list[list[tuple[float, float, str]]]] = []
    for line in run:
        cells: list[list[tuple[float, float, str]]] = [[] for _ in columns]
        for span in line.spans:
            cells[_column(columns, span)].append((span.y0, span.x0, span.text))
        if rows and not cells[0] and not any(is_number(s.text) for s in line.spans):
            for k, found in enumerate(cells):
                rows[-1][k].extend(found)  # a wrapped cell
        else:
            rows.append(cells)
    grid = [[cell_text(cell) for cell in row] for row in rows]
    if sum(len([c for c in row if c]) >= 2 for row in grid) < least:
        return None
    spanning = [False] * len(grid)
    table = make_table(grid, spanning, page, (columns[0][0], columns[-1][1]))
    if table is None:
        return None
    return Item(min(ln.x0 for ln in run), min(ln.y0 for ln in run), max(ln.x1 for ln in run),
                max(ln.y1 for ln in run), table=table)


def _columns(spans: list[Span]) -> list[tuple[float, float]]:
    """Stretches of the page covered by spans, merged where they overlap."""
    out: list[tuple[float, float]] = []
    for span in sorted(spans, key=lambda s: s.x0):
        if out and span.x0 <= out[-1][1] + 0.3 * max(span.size, 1.0):
            out[-1] = (out[-1][0], max(out[-1][1], span.x1))
        else:
            out.append((span.x0, span.x1))
    return out


def _column(columns: list[tuple[float, float]], span: Span) -> int:
    centre = (span.x0 + span.x1) / 2
    best = min(range(len(columns)), key=lambda k: 0 if columns[k][0] <= centre <= columns[k][1]
               else min(abs(centre - columns[k][0]), abs(centre - columns[k][1])))
    return best

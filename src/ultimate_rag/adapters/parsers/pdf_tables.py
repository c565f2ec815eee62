"""Tables on PDF pages, as rows under their header.

Two kinds are found (before the page's lines are grouped into paragraphs):

* **Ruled** (``pdf_grid.py``): horizontal and vertical ruling lines that cross make a grid; each
  cell's text is what lies inside it. A cell whose inner border is missing is merged with its
  neighbour, and its text fills every grid cell it covers: a header spanning two columns names
  both, a row label spanning three rows labels all three.
* **Unruled** (``pdf_columns.py``): at least three lines whose spans fall into the same two or
  more columns, with gaps between them; prose set in two columns is not a table.

The header is the first row; more rows join it while the row above has a cell spanning several
columns (a multi-row header) and the row is not numbers: each column is named by its header
cells from top to bottom ("2023 Q1"). A table at the end of a page and one at the start of the
next with the same columns are one table (the repeated header, when there is one, is dropped).
The blocks are written by the grid model every format shares (``tables.py``): a Markdown pipe
table whose every data row cites its page, its row and the table's number, so the chunker repeats
the header in every chunk of it (or writes ``column: value`` records) and a chunk cites "table 2,
page 4, rows 12-20".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ultimate_rag.domain.models import Block, SourceLocator

from .pdf_lines import Line, Rule, join_spans
from .pdf_text import Item, join_lines
from .tables import Cell, Row, table_blocks

MAX_HEADER_ROWS = 3
_NUMBER = re.compile(r"^[-+(]?[$€£¥%]?\s*\d[\d,.\s]*%?\)?$|^[-–—]$")
_YEAR = re.compile(r"^(19|20)\d\d$")
_CONTINUED = re.compile(r"^(续表|續表|\(?continued\)?|table \S+ \(?cont(inued|'d|\.)\)?)", re.IGNORECASE)


@dataclass
class Table:
    header: list[str]  # one name per column
    rows: list[list[str]]
    pages: list[int]  # the page of each row
    edges: tuple[float, float]  # the table's left and right edge, to recognise its continuation
    head_rows: list[list[str]] = field(default_factory=list)  # the header as it was drawn


def is_number(text: str) -> bool:
    return bool(_NUMBER.match(text.strip())) if text.strip() else False


def make_table(grid: list[list[str]], spans_columns: list[bool], page: int,
               edges: tuple[float, float]) -> Table | None:
    """A table from its cell texts (row by row; ``spans_columns[i]``: row i has a cell spanning
    several columns); None when fewer than two columns or rows have text."""
    grid = [row for row in grid if any(cell for cell in row)]
    used = [j for j in range(max((len(r) for r in grid), default=0)) if any(j < len(r) and r[j] for r in grid)]
    grid = [[row[j] if j < len(row) else "" for j in used] for row in grid]
    if len(used) < 2 or len(grid) < 2:
        return None
    if not spans_columns[0] and _data_row(grid[0], grid[1:]):  # no header drawn: the columns get the chunker's names
        return Table(header=[f"column {k}" for k in range(1, len(used) + 1)], rows=grid, pages=[page] * len(grid),
                     edges=edges)
    head = 1
    while (head < min(MAX_HEADER_ROWS, len(grid) - 1) and spans_columns[head - 1]
           and not any(is_number(cell) for cell in grid[head])):
        head += 1
    names = []
    for j in range(len(used)):
        parts: list[str] = []
        for row in grid[:head]:
            if row[j] and (not parts or parts[-1] != row[j]):
                parts.append(row[j])
        names.append(" / ".join(parts))  # as tables.py names grouped columns: "2023 / Q1"
    return Table(header=names, rows=grid[head:], pages=[page] * (len(grid) - head), edges=edges,
                 head_rows=grid[:head])


def _data_row(first: list[str], rest: list[list[str]]) -> bool:
    """Whether the first row is data like the rows below it: a number in a column that holds
    numbers in most rows below (a year over a column of other numbers is a header)."""
    for j, cell in enumerate(first):
        below = [row[j] for row in rest]
        if not is_number(cell) or sum(map(is_number, below)) * 2 < len(below):
            continue
        if not (_YEAR.match(cell.strip()) and not any(_YEAR.match(b.strip()) for b in below)):
            return True
    return False


def cell_text(pieces: list[tuple[float, float, str]]) -> str:
    """The text of one cell from its pieces (top, left, text): visual lines in order, joined."""
    rows: list[list[tuple[float, float, str]]] = []
    for piece in sorted(pieces):
        if rows and abs(piece[0] - rows[-1][0][0]) <= 2.0:
            rows[-1].append(piece)
        else:
            rows.append([piece])
    return join_lines([join_spans([p[2] for p in sorted(row, key=lambda p: p[1])]) for row in rows]).replace(
        "\n", " ")


def find_tables(lines: list[Line], rules: list[Rule], page: int, width: float = 0.0) -> tuple[list[Item], list[Line]]:
    """The tables of a page as items, and the lines that are not part of one."""
    from .pdf_columns import unruled_tables
    from .pdf_grid import ruled_tables

    items, rest = ruled_tables(lines, rules, page)
    more, rest = unruled_tables(rest, page, width)
    return items + more, rest


def join_continued(pages: list[list[Item]]) -> list[list[Item]]:
    """A table that ends a page and one that starts the next page with the same columns become one:
    the second one's rows go to the first (its header too, unless it repeats the first's)."""
    for number in range(1, len(pages)):
        before = next((it for it in reversed(pages[number - 1]) if it.asset is None), None)
        if before is None or before.table is None:
            continue
        start = 0
        if start < len(pages[number]) and _CONTINUED.match(pages[number][start].text.strip()):
            start += 1
        if start >= len(pages[number]) or pages[number][start].table is None:
            continue
        first, second = before.table, pages[number][start].table
        assert second is not None
        if len(first.header) != len(second.header) or not _aligned(first.edges, second.edges):
            continue
        moved = second.rows if second.header == first.header else [*second.head_rows, *second.rows]
        moved_pages = second.pages if second.header == first.header else [
            second.pages[0] if second.pages else number + 1] * len(second.head_rows) + second.pages
        first.rows.extend(moved)
        first.pages.extend(moved_pages)
        del pages[number][:start + 1]
    return pages


def _aligned(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return abs(a[0] - b[0]) <= 12 and abs(a[1] - b[1]) <= 12


def table_block(table: Table, number: int) -> list[Block]:
    """The table as the shared grid model writes every format's tables (``tables.py``): a Markdown
    pipe table under its column names, each data row citing its page and its row as the table
    counts them (header rows included, a header drawn again on a continued page not), and the
    table's number in the document."""
    head = max(1, len(table.head_rows))
    rows = [Row([Cell(name) for name in table.header], number=1, header=True,
                locator=SourceLocator(page=table.pages[0] if table.pages else None))]
    rows.extend(Row([Cell(" ".join(cell.split())) for cell in cells], number=head + n,
                    locator=SourceLocator(page=page))
                for n, (cells, page) in enumerate(zip(table.rows, table.pages, strict=True), start=1))
    return table_blocks(rows, table=number, layout=False)

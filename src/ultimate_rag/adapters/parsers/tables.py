"""Tables of every format as rows under their header: one grid model that DOCX, HTML, Markdown,
PPTX, ODF (and PDF) tables are read into, resolved the way a reader reads the table, and written
as a Markdown pipe table whose block carries one locator per data row.

* **Merged cells.** A cell spanning columns (``gridSpan``, ``colspan``,
  ``number-columns-spanned``) names every column it spans when it is a header cell, and sits in
  its first column when it is a body cell; a cell spanning rows (``vMerge``, ``rowspan``,
  ``number-rows-spanned``) repeats its value in every row it spans, so each row stands alone.
* **Header rows.** The rows the source marks as header (a repeated header row, ``<thead>`` or
  ``<th>`` rows, ``table:table-header-rows``, PowerPoint's first-row flag), else the first row;
  extended downwards while a header cell spans rows, or groups columns over a row of labels under
  it. Each column's name is its header texts from the top down, joined: ``Revenue / 2024``.
* **Captions.** Leading rows that are one cell across the whole table (or, in a table of three
  columns or more, hold only a first cell over a row of several) are the table's title: they
  become a paragraph before the table, not its header.
* **Layout tables** (one column around long text) are not data: their cells are read as paragraphs.

The chunker (``adapters/chunking/tables.py``) then repeats the header in every chunk of a table
(or writes ``column: value`` records for wide ones) and cites the rows, the table and the page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ultimate_rag.domain.models import Block, SourceLocator

MAX_SPAN = 1000  # HTML's own cap on colspan; a larger span is read as this
MAX_HEADER_ROWS = 4
LAYOUT_CELL_CHARS = 300  # a one-column table holding a cell this long is a frame around text, not data
MAX_GRID_CELLS = 2_000_000  # positions of one table once spans are expanded (a hostile rowspan)
_PERIOD = re.compile(r"^(?:FY|CY|Q[1-4])?\s?(?:19|20)\d\d(?:\s?[/–-]\s?\d{2,4})?$|^Q[1-4]$", re.IGNORECASE)
CAPTION_JOIN = " — "  # between a caption and the title rows of the table under it
_NUMBER = re.compile(r"^[\s(+\-−–]*[$€£¥%]?\s*\d[\d\s.,'’]*\s*[%$€£¥)]?[\s)*]*$|^[-–—]$")


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    colspan: int = 1
    rowspan: int = 1
    continued: bool = False  # DOCX ``vMerge`` continuation: this position belongs to the cell above
    header: bool = False  # marked as a header cell (HTML ``<th>``)


@dataclass(frozen=True, slots=True)
class Row:
    cells: Sequence[Cell]
    number: int = 0  # the row's number as its source counts it; 0: its position in the table (1-based)
    header: bool = False  # marked as a header row by the source
    locator: SourceLocator = field(default_factory=SourceLocator)  # where the row lies (page, paragraphs)


@dataclass(slots=True)
class _Slot:
    text: str
    origin: bool  # the cell's own position (not a copy spread by a span)
    below: bool  # a copy spread downwards (rowspan / vMerge)
    cell: Cell


def table_markdown(rows: list[list[str]]) -> str:
    """Rows as a Markdown pipe table: the first row is the header, every row padded to one width."""
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = []
    for i, row in enumerate(rows):
        cells = [_cell_text(cell) for cell in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if i == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines)


def plain_rows(rows: Sequence[Sequence[str]]) -> list[Row]:
    """A plain grid (no spans, no marks) as rows."""
    return [Row([Cell(text) for text in row]) for row in rows]


def table_blocks(rows: Sequence[Row], *, table: int | None = None, locator: SourceLocator | None = None,
                 layout: bool = True, caption: str = "") -> list[Block]:
    """The blocks of one table: the table (``rows`` locating each data row; ``caption`` and the
    title rows above its header as its caption), or, when ``layout`` allows it, the cells as
    paragraphs for a layout table (a spreadsheet is always a table), the caption first."""
    base = locator or SourceLocator()
    titles = [" ".join(caption.split())] if caption.strip() else []
    grid, numbers, marked, locators = _grid(rows)
    keep = [i for i, line in enumerate(grid) if any(slot and slot.text.strip() for slot in line)]
    grid, numbers, marked = [grid[i] for i in keep], [numbers[i] for i in keep], [marked[i] for i in keep]
    locators = [locators[i] for i in keep]
    if not grid:
        return [Block(kind="paragraph", text=title, locator=base) for title in titles]
    width = max(len(line) for line in grid)
    used = [c for c in range(width) if any(_has_text(line, c) for line in grid)]
    blocks: list[Block] = []
    title_locators: list[SourceLocator] = []
    while len(grid) > 2 and len(used) > 1 and _title_row(grid[0], grid[1], width, len(used)):
        titles.append(" ".join(_first_text(grid[0]).split()))
        title_locators.append(locators[0])
        grid, numbers, marked, locators = grid[1:], numbers[1:], marked[1:], locators[1:]
    if layout and len(used) <= 1 and any(len(slot.text) > LAYOUT_CELL_CHARS for line in grid for slot in line if slot):
        blocks.extend(Block(kind="paragraph", text=title, locator=base) for title in titles)
        for line, where in zip(grid, locators, strict=True):
            texts = [slot.text for slot in line if slot and slot.origin and slot.text.strip()]
            blocks.extend(Block(kind="paragraph", text=text, locator=merge_locator(base, where)) for text in texts)
        return blocks
    grid = [[line[c] if c < len(line) else None for c in used] for line in grid]
    head = _header_rows(grid, marked)
    for r in range(head - 1):
        _spread_groups(grid[r], grid[r + 1])
    names = _column_names(grid[:head])
    body = [[_body_text(slot) for slot in line] for line in grid[head:]]
    table_locator = replace(base, table=table)
    located = tuple(
        replace(merge_locator(table_locator, where), row_start=number, row_end=number)
        for number, where in zip(numbers[head:], locators[head:], strict=True))
    text = _markdown(names, body)
    block_locator = merge_locator(table_locator, *title_locators, *locators)
    if located:
        block_locator = replace(block_locator, row_start=located[0].row_start, row_end=located[-1].row_end)
    blocks.append(Block(kind="table", text=text, locator=block_locator, rows=located,
                        caption=CAPTION_JOIN.join(titles)))
    return blocks


def _grid(rows: Sequence[Row]) -> tuple[list[list[_Slot | None]], list[int], list[bool], list[SourceLocator]]:
    """Every row as positions: a spanning cell fills each position it covers (copies marked as
    such), a DOCX continuation takes the value of the position above."""
    grid: list[list[_Slot | None]] = [[] for _ in rows]
    total = 0
    for r, row in enumerate(rows):
        line = grid[r]
        c = 0
        for cell in row.cells:
            while c < len(line) and line[c] is not None:
                c += 1
            colspan = max(1, min(cell.colspan, MAX_SPAN))
            if cell.continued and r > 0:
                above = grid[r - 1]
                for k in range(c, c + colspan):
                    source = above[k] if k < len(above) else None
                    # the column the cell above starts in repeats down; the columns it spans stay empty
                    _put(line, k, _Slot(source.text, False, source.origin or source.below, source.cell)
                         if source else None)
                c += colspan
                continue
            rowspan = max(1, min(cell.rowspan, len(rows) - r))
            total += colspan * rowspan
            if total > MAX_GRID_CELLS:  # hostile spans: the rest is read without them
                colspan = rowspan = 1
            for dr in range(rowspan):
                for dc in range(colspan):
                    _put(grid[r + dr], c + dc, _Slot(cell.text, dr == 0 and dc == 0, dr > 0 and dc == 0, cell))
            c += colspan
    numbers = [row.number or i + 1 for i, row in enumerate(rows)]
    marked = [row.header or (any(c.text.strip() for c in row.cells)
                             and all(c.header for c in row.cells if c.text.strip())) for row in rows]
    return grid, numbers, marked, [row.locator for row in rows]


def _has_text(line: list[_Slot | None], column: int) -> bool:
    slot = line[column] if column < len(line) else None
    return slot is not None and bool(slot.text.strip())


def _put(line: list[_Slot | None], index: int, slot: _Slot | None) -> None:
    while len(line) <= index:
        line.append(None)
    if line[index] is None:
        line[index] = slot


def _title_row(line: list[_Slot | None], below: list[_Slot | None], width: int, used: int) -> bool:
    """A title above the table: one cell across its whole width, or (a spreadsheet's title in A1,
    merged over some columns or not) the only cell of its row, in the first column, over a table of
    three columns or more whose next row has several."""
    origins = [slot for slot in line if slot and slot.origin]
    if len(origins) == 1 and origins[0].cell.colspan >= width and len(line) >= width:
        return True
    texts = [slot for slot in line if slot and slot.text.strip()]
    first = line[0] if line else None
    # one cell of text (merged over some of the columns or not), in the first column
    return (used >= 3 and first is not None and first.origin and first.cell.rowspan == 1 and bool(texts)
            and all(slot.cell is first.cell for slot in texts) and len(texts) < used
            and sum(1 for slot in below if slot and slot.origin and slot.text.strip()) >= 2)


def _first_text(line: list[_Slot | None]) -> str:
    return next((slot.text for slot in line if slot and slot.origin), "")


def _header_rows(grid: list[list[_Slot | None]], marked: list[bool]) -> int:
    """How many of the first rows are the header (see the module docstring)."""
    head = 0
    while head < len(grid) - 1 and marked[head] and head < MAX_HEADER_ROWS:
        head += 1
    head = max(head, 1)
    while head < min(len(grid) - 1, MAX_HEADER_ROWS):
        spans_down = any(slot and slot.origin and slot.cell.rowspan + r > head
                         for r, line in enumerate(grid[:head]) for slot in line)
        if not spans_down and not any(slot and slot.below for slot in grid[head]) \
                and not _sub_header(grid[head - 1], grid[head]) \
                and not _unmerged_sub_header(grid[head - 1], grid[head], grid[head + 1]):
            break
        head += 1
    return head


def _sub_header(above: list[_Slot | None], line: list[_Slot | None]) -> bool:
    """``line`` labels the columns that a cell of ``above`` groups (``Revenue`` over ``2024 |
    2025``): there is such a group, the other columns have nothing of their own in ``line``, and
    what it has under the groups are labels (words, years, quarters), not data."""
    grouped = {c for c, slot in enumerate(above) if slot and slot.cell.colspan > 1}
    if not grouped:
        return False
    own = [slot.text for c, slot in enumerate(line) if slot and not slot.below and slot.text.strip()
           and c not in grouped]
    labels = [slot.text for c, slot in enumerate(line) if slot and slot.text.strip() and c in grouped]
    return not own and bool(labels) and all(_PERIOD.match(t.strip()) or not _NUMBER.match(t) for t in labels)


def _groups(above: list[_Slot | None], line: list[_Slot | None]) -> dict[int, int]:
    """Unmerged groups: each empty position of ``above`` whose ``line`` position has a label,
    right of a text of ``above`` with a label under it too and only such positions between →
    the column of that text (``Q1 | | Q2 |`` over ``Revenue | Cost | Revenue | Cost``)."""
    groups: dict[int, int] = {}
    start: int | None = None
    for c, slot in enumerate(above):
        if _has_text(above, c) and slot is not None:
            start = c if slot.origin and slot.cell.colspan == 1 and _label(line, c) else None
        elif start is not None and _label(line, c):
            groups[c] = start
        else:
            start = None
    return groups


def _label(line: list[_Slot | None], column: int) -> bool:
    slot = line[column] if column < len(line) else None
    text = slot.text.strip() if slot else ""
    return bool(text) and (bool(_PERIOD.match(text)) or not _NUMBER.match(text))


def _unmerged_sub_header(above: list[_Slot | None], line: list[_Slot | None], below: list[_Slot | None]) -> bool:
    """The heuristic for sheets and tables whose grouping cells are not merged: ``line`` holds
    only labels, groups of ``above`` stand over it (``_groups``), and the row after it has numbers
    in at least half of the grouped columns (so a first data row of words is not taken)."""
    groups = _groups(above, line)
    if not groups or not all(_label(line, c) for c, slot in enumerate(line) if slot and slot.text.strip()):
        return False
    grouped = set(groups) | set(groups.values())
    numbers = sum(1 for c in grouped if _number_at(below, c))
    return numbers * 2 >= len(grouped)


def _number_at(line: list[_Slot | None], column: int) -> bool:
    slot = line[column] if column < len(line) else None
    return slot is not None and bool(slot.text.strip()) and bool(_NUMBER.match(slot.text))


def _spread_groups(above: list[_Slot | None], line: list[_Slot | None]) -> None:
    """A header row's unmerged group texts spread over the empty positions they stand for."""
    for c, start in _groups(above, line).items():
        source = above[start]
        if source is not None:
            above[c] = _Slot(source.text, False, False, source.cell)


def _column_names(header: list[list[_Slot | None]]) -> list[str]:
    width = max(len(line) for line in header)
    names = []
    for c in range(width):
        parts: list[str] = []
        for line in header:
            slot = line[c] if c < len(line) else None
            text = " ".join(slot.text.split()) if slot else ""
            if text and (not parts or parts[-1] != text):
                parts.append(text)
        names.append(" / ".join(parts))
    return names


def _body_text(slot: _Slot | None) -> str:
    """A body position: the cell's text at its own position and in the rows it spans down; empty
    in the further columns it spans."""
    if slot is None or not (slot.origin or slot.below):
        return ""
    return slot.text


def _markdown(names: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_cell_text(name) for name in names) + " |", "|" + "---|" * len(names)]
    lines.extend("| " + " | ".join(_cell_text(text) for text in row) + " |" for row in body)
    return "\n".join(lines)


def _cell_text(text: str) -> str:
    """One line (a line break would end the table row), bars escaped."""
    if "\n" in text or "\r" in text:
        text = " ".join(text.split())
    return text.replace("|", "\\|")


def merge_locator(base: SourceLocator, *parts: SourceLocator) -> SourceLocator:
    """``base`` with the pages and paragraph ranges of ``parts`` (the rows of a table)."""
    pages = sorted({p for loc in parts for p in (loc.page, loc.page_start, loc.page_end) if p is not None})
    starts = [loc.paragraph_start for loc in parts if loc.paragraph_start is not None]
    ends = [loc.paragraph_end for loc in parts if loc.paragraph_end is not None]
    merged = base
    if pages:
        one = len(pages) == 1
        merged = replace(merged, page=pages[0] if one else None, page_start=None if one else pages[0],
                         page_end=None if one else pages[-1])
    if starts:
        merged = replace(merged, paragraph_start=min(starts), paragraph_end=max(ends or starts))
    return merged

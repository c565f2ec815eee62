"""Page furniture: what a page carries that is not its body text, found before layout.

* **Running headers and footers**: a line near the top or bottom edge of a page (among the two
  outermost lines, in the outer ``MARGIN`` of the page, set apart from the body by at least
  ``APART`` line heights) whose text, digits aside, comes back at the same height on at least
  ``REPEATS`` pages ("Cython Reference Guide, Release 0.29a0", "4 Chapter 1. Compilation").
  Kept once each in the document's metadata (``page_furniture``), never embedded.
  An outer line that starts or ends with a number and has at most ``MAX_NUMBERED_WORDS`` words
  is one too when such lines and running lines are found on that side of ``REPEATS`` pages: a page
  number with its chapter's or section's title ("4 Chapter 1. Compilation", "1.8. Compiler
  directives 5") repeats only within its chapter, if at all.
* **Page numbers**: such an outer line that is only a page number ("3", "- 3 -", "iv",
  "Page 3 of 12", "3 / 12", "第 3 页"). Dropped (counted in ``page_furniture.page_numbers``).
* **Table-of-contents lines**: on a page with at least ``CONTENTS_LINES`` lines that end in dot
  leaders and a page number (``Compilation . . . . 3``), every such line, and the lines between
  them that end in a page number aligned with them (a chapter line set without leaders), or that
  carry on a title to the next entry, and the page's "Contents" title. Kept in the metadata
  (``contents``: title and page), never embedded: a contents page must not outrank the section it
  points to, nor head every section that follows it.

Nothing else is touched: a line that merely repeats (a table header on continued pages sits in
the body, close to its rows) is body text.
"""

from __future__ import annotations

import re
from collections import defaultdict

from .pdf_lines import Line

MARGIN = 0.2  # share of the page height at the top and at the bottom (LaTeX sets page numbers at 83 %)
APART = 0.8  # line heights between a running header or footer and the nearest body line
REPEATS = 3  # pages a running header or footer must be found on
CONTENTS_LINES = 3
MAX_KEPT = 50  # distinct running headers/footers, contents entries: at most this many kept as metadata
_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(
    r"^(?:page|p\.|seite|pagina|página|стр\.?|第)?\s*[-–—]?\s*(?:\d{1,5}|[ivxlcdm]{1,7})\s*[-–—]?\s*"
    r"(?:(?:of|/|von|de|sur|из|共)\s*\d{1,5})?\s*(?:页|頁|페이지)?$", re.IGNORECASE)
_LEADER = re.compile(r"^(?P<title>.*?\S)\s*(?:(?:\.\s*){3,}|…+|(?:·\s*){3,}|(?:_\s*){3,})\s*"
                     r"(?P<page>\d{1,5}|[ivxlcdm]{1,7})$", re.IGNORECASE)
_NUMBERED = re.compile(r"^(?:\d{1,4}|[ivxlc]{1,6})\s+\S.*|.*\S\s+(?:\d{1,4}|[ivxlc]{1,6})$", re.IGNORECASE)
MAX_NUMBERED_WORDS = 10
_CONTENTS_TITLE = re.compile(r"^(table of contents|contents|inhalt(sverzeichnis)?|sommaire|table des matières|índice|"
                             r"indice|目\s*录|目\s*錄|目\s*次|차\s*례|содержание)$", re.IGNORECASE)
_MEMBERS: dict[int, list[Line]] = {}  # a row's merged line -> its lines (for one call of strip_furniture)
_TRAILING_NUMBER = re.compile(r"^(?P<title>.*\S)\s+(?P<page>\d{1,5})$")


def strip_furniture(pages: list[list[Line]],
                    sizes: list[tuple[float, float]]) -> tuple[list[list[Line]], dict[str, object]]:
    """The lines of every page without its furniture, and the metadata that keeps what was taken
    out (running headers and footers, the contents entries, how many page numbers were dropped)."""
    _MEMBERS.clear()
    edges = [_outer_lines(lines, height) for lines, (_, height) in zip(pages, sizes, strict=True)]
    seen: dict[tuple[str, str, int], set[int]] = defaultdict(set)
    for number, page_edges in enumerate(edges):
        for side, line, height in page_edges:
            seen[(side, _key(line.text), round(line.y0 / max(height, 1.0) * 100))].add(number)
    furniture: dict[str, list[str]] = {"headers": [], "footers": []}
    page_numbers = 0
    drop: set[int] = set()
    repeats = min(REPEATS, sum(1 for lines in pages if lines))
    running: dict[str, list[Line]] = {"top": [], "bottom": []}
    numbered: list[tuple[str, Line]] = []
    for page_edges in edges:
        for side, line, height in page_edges:
            if _PAGE_NUMBER.match(line.text.strip()):
                page_numbers += 1
                drop.update(_ids(line))
                continue
            position = round(line.y0 / max(height, 1.0) * 100)
            key = _key(line.text)
            pages_with = set().union(*(seen.get((side, key, position + d), set()) for d in (-1, 0, 1)))
            if repeats >= 2 and len(pages_with) >= repeats:
                running[side].append(line)
            elif _NUMBERED.match(line.text.strip()) and len(line.text.split()) <= MAX_NUMBERED_WORDS:
                numbered.append((side, line))
    # a page number with the chapter's title ("6 Chapter 2. Language Basics") repeats only within
    # its chapter: an outer line like that is furniture where that side of the page has some
    for side, line in numbered:
        if len(running[side]) + sum(1 for other, _ in numbered if other == side) >= REPEATS:
            running[side].append(line)
    for side, lines in running.items():
        kept = furniture["headers" if side == "top" else "footers"]
        for line in lines:
            drop.update(_ids(line))
            if len(kept) < MAX_KEPT and not any(_key(k) == _key(line.text) for k in kept):
                kept.append(line.text)
    contents: list[dict[str, object]] = []
    out: list[list[Line]] = []
    for lines in pages:
        body = [line for line in lines if id(line) not in drop]
        out.append(_strip_contents(body, contents))
    metadata: dict[str, object] = {}
    if furniture["headers"] or furniture["footers"] or page_numbers:
        metadata["page_furniture"] = {**{k: v for k, v in furniture.items() if v}, "page_numbers": page_numbers}
    if contents:
        metadata["contents"] = contents[:MAX_KEPT * 10]
    _MEMBERS.clear()
    return out, metadata


def _ids(line: Line) -> set[int]:
    return {id(member) for member in _MEMBERS.get(id(line), [line])}


def _key(text: str) -> str:
    return _DIGITS.sub("#", " ".join(text.casefold().split()))


def _outer_lines(lines: list[Line], height: float) -> list[tuple[str, Line, float]]:
    """The (at most two) topmost and bottommost rows of the page that sit in its margin, set apart
    from the rest of the page; a row's lines side by side ("4" and "Chapter 1. Compilation") are
    one line here."""
    if height <= 0 or not lines:
        return []
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda ln: ln.y0):
        if rows and _same_row(rows[-1][0], line):
            rows[-1].append(line)
        else:
            rows.append([line])
    found: list[tuple[str, Line, float]] = []
    if len(rows) < 2:
        return found  # the page's only text is its body, wherever it stands
    for side, candidates in (("top", rows[:2]), ("bottom", rows[::-1][:2])):
        for row in candidates:
            line = _row_line(row)
            inside = line.y1 <= MARGIN * height if side == "top" else line.y0 >= (1 - MARGIN) * height
            others = [r[0] for r in rows if r is not row]
            if side == "top":
                gap = min((o.y0 - line.y1 for o in others if o.y0 >= line.y1 - 0.5 * line.height), default=height)
            else:
                gap = min((line.y0 - o.y1 for o in others if o.y1 <= line.y0 + 0.5 * line.height), default=height)
            if inside and gap >= APART * max(line.height, 1.0):
                found.append((side, line, height))
    return found


def _row_line(row: list[Line]) -> Line:
    """The lines of one row as one line (its spans left to right), remembering its members."""
    if len(row) == 1:
        return row[0]
    members = sorted(row, key=lambda ln: ln.x0)
    merged = Line(min(ln.x0 for ln in row), min(ln.y0 for ln in row), max(ln.x1 for ln in row),
                  max(ln.y1 for ln in row), [span for ln in members for span in ln.spans], members[0].size)
    _MEMBERS[id(merged)] = members
    return merged


def _same_row(a: Line, b: Line) -> bool:
    return min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5 * min(a.height, b.height)


def _strip_contents(lines: list[Line], contents: list[dict[str, object]]) -> list[Line]:
    """The page without its table-of-contents lines (module docstring), which go to ``contents``."""
    entries = [line for line in lines if _LEADER.match(line.text.strip())]
    if len(entries) < CONTENTS_LINES:
        return lines
    right = max(line.x1 for line in entries)
    tolerance = 2 * max(line.size for line in entries)
    matches = [_LEADER.match(line.text.strip()) or (
        _TRAILING_NUMBER.match(line.text.strip()) if abs(line.x1 - right) <= tolerance else None) for line in lines]
    first = lines.index(entries[0])
    while first > 0 and matches[first - 1] is not None:
        first -= 1  # a chapter line before the first dotted entry
    last = max(i for i, match in enumerate(matches) if match is not None)
    kept = [line for line in lines[:first] if not _CONTENTS_TITLE.match(line.text.strip())]
    pending: list[str] = []
    for line, match in zip(lines[first:last + 1], matches[first:last + 1], strict=True):
        if match is None:
            if line.x0 >= entries[0].x0 - tolerance and line.x1 <= right:
                pending.append(line.text.strip())  # a title over two lines: carried on to the next entry
            else:
                kept.append(line)
            continue
        contents.append({"title": " ".join([*pending, match.group("title")]).strip(), "page": match.group("page")})
        pending = []
    return kept + lines[last + 1:]

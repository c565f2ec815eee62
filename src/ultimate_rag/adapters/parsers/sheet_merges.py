"""Merged cells of an XLSX worksheet, which openpyxl's read-only (streaming) mode does not report.

The sheet's ``<mergeCells>`` list comes after its cell data, so it is found by one streaming pass
over the sheet's XML part: the part is inflated and decoded 1 MiB at a time and ``mergeCell``
references are matched as they pass (memory stays bounded whatever the sheet's size; at most
``MAX_MERGES`` ranges per sheet are kept, the rest are read unmerged). The ranges then turn the
sheet's rows of values into ``tables.Row`` cells with their spans: a merged range's first cell
spans its columns and the sheet rows it covers, its other positions are left to it (or kept as
empty cells where its first row holds nothing, so no later cell moves left).
"""

from __future__ import annotations

import codecs
import posixpath
import re
import zipfile
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import IO, AnyStr

from .limits import ParseLimits
from .packages import read_capped
from .tables import MAX_GRID_CELLS, MAX_SPAN, Cell, Row
from .zipxml import parse_xml

MAX_MERGES = 100_000
_CHUNK = 1 << 20
_OVERLAP = 512  # a mergeCell tag is matched whole when it starts this far before a chunk's end
_MERGE = re.compile(r"<(?:[\w.-]+:)?mergeCell\b[^>]{0,400}?\bref\s*=\s*[\"']\s*([A-Za-z]{1,3})(\d{1,7})"
                    r"(?::([A-Za-z]{1,3})(\d{1,7}))?\s*[\"']")
_MERGE_BYTES = re.compile(_MERGE.pattern.encode("ascii"))
_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PACKAGE_REL = "http://schemas.openxmlformats.org/package/2006/relationships"

Range = tuple[int, int, int, int]  # first row, first column, last row, last column (1-based)


def sheet_parts(archive: zipfile.ZipFile, limits: ParseLimits) -> dict[str, str]:
    """Each worksheet's name → its XML part (``xl/worksheets/sheet1.xml``), from the workbook and
    its relationships; empty when the package does not say."""
    names = set(archive.namelist())
    if "xl/workbook.xml" not in names or "xl/_rels/workbook.xml.rels" not in names:
        return {}
    workbook = parse_xml(read_capped(archive, archive.getinfo("xl/workbook.xml"), limits, "XLSX"),
                         "xl/workbook.xml", "XLSX")
    rels = parse_xml(read_capped(archive, archive.getinfo("xl/_rels/workbook.xml.rels"), limits, "XLSX"),
                     "xl/_rels/workbook.xml.rels", "XLSX")
    targets = {rel.get("Id"): rel.get("Target") or "" for rel in rels.iter(f"{{{_PACKAGE_REL}}}Relationship")}
    parts = {}
    for sheet in workbook.iter(f"{{{_MAIN}}}sheet"):
        target = targets.get(sheet.get(f"{{{_REL}}}id"), "")
        if target:
            path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("xl", target))
            parts[sheet.get("name") or ""] = path
    return parts


def read_merges(archive: zipfile.ZipFile, part: str) -> list[Range]:
    """The merged ranges of one worksheet part (one streaming pass, see the module docstring)."""
    try:
        entry = archive.getinfo(part)
    except KeyError:
        return []
    found: list[Range] = []
    for groups in _matches(archive, entry):
        first, last = _cell(groups[0], groups[1]), _cell(groups[2], groups[3])
        if first is None:
            continue
        last = last or first
        bounds = (min(first[0], last[0]), min(first[1], last[1]), max(first[0], last[0]), max(first[1], last[1]))
        if bounds[:2] != bounds[2:]:
            found.append(bounds)
            if len(found) >= MAX_MERGES:
                break
    return found


def _matches(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> Iterator[tuple[str, ...]]:
    """The references' groups as they pass. A UTF-8 part (nearly all) is searched as bytes, a
    window skipped unless it holds ``mergeCell`` at all (the cell data are most of the part);
    another encoding is decoded first."""
    with archive.open(entry) as stream:
        head = stream.read(_CHUNK)
        encoding = _encoding(head)
        if encoding in ("utf-8", "utf-8-sig"):
            yield from _scan(stream, head, b"", _MERGE_BYTES, lambda chunk: chunk, b"mergeCell")
            return
        decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        yield from _scan(stream, head, "", _MERGE, lambda chunk: decoder.decode(chunk, final=not chunk), "mergeCell")


def _scan(stream: IO[bytes], head: bytes, empty: AnyStr, pattern: re.Pattern[AnyStr],
          decode: Callable[[bytes], AnyStr], word: AnyStr) -> Iterator[tuple[str, ...]]:
    window, chunk = empty, head
    while True:
        last = not chunk
        window += decode(chunk)
        cut = len(window) if last else max(0, len(window) - _OVERLAP)
        if word in window:
            for match in pattern.finditer(window):
                if match.start() >= cut:
                    break
                yield tuple(_text(group) for group in match.groups())
        if last:
            return
        window = window[cut:]
        chunk = stream.read(_CHUNK)


def _text(group: str | bytes | None) -> str:
    return group.decode("ascii") if isinstance(group, bytes) else group or ""


def _encoding(head: bytes) -> str:
    """The part's encoding: its byte-order mark, else its XML declaration, else UTF-8."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    declared = re.match(rb"<\?xml[^>]*encoding\s*=\s*[\"']([A-Za-z0-9._-]+)", head.lstrip(b"\xef\xbb\xbf"))
    if declared:
        try:
            return codecs.lookup(declared.group(1).decode("ascii")).name
        except LookupError:
            pass
    return "utf-8-sig"


def _cell(column: str, row: str) -> tuple[int, int] | None:
    if not column or not row:
        return None
    number = 0
    for letter in column.upper():
        number = number * 26 + ord(letter) - 64
    return int(row), number


def merged_rows(rows: Sequence[tuple[int, Sequence[str]]], merges: Sequence[Range]) -> list[Row]:
    """The sheet's rows (sheet row number, cell texts from column A) as table rows whose merged
    ranges span their columns and the present rows they cover."""
    if not merges:
        return [Row([Cell(text) for text in texts], number=number) for number, texts in rows]
    present = [number for number, _ in rows]  # ascending, as the sheet streams them
    origins: dict[tuple[int, int], tuple[int, int]] = {}  # (row index, column) → (colspan, rowspan)
    covered: dict[int, dict[int, bool]] = {}  # row index → column → taken by a span placed above or left
    budget = MAX_GRID_CELLS  # hostile ranges (a whole sheet merged, many times over) stop being applied
    for top, left, bottom, right in merges:
        right = min(right, left + MAX_SPAN - 1)
        first, end = bisect_left(present, top), bisect_right(present, bottom)
        budget -= (end - first) * (right - left + 1)
        if budget < 0:
            break
        if first >= end:
            continue
        placed = present[first] == top  # the range's own first row holds its value
        if placed:
            origins[(first, left)] = (right - left + 1, end - first)
        for i in range(first, end):
            for column in range(left, right + 1):
                if (i, column) != (first, left) or not placed:
                    covered.setdefault(i, {})[column] = placed
    out = []
    for i, (number, texts) in enumerate(rows):
        taken = covered.get(i, {})
        width = max(len(texts), max(taken, default=0))
        cells = []
        for column in range(1, width + 1):
            if column in taken:
                if not taken[column]:
                    cells.append(Cell(""))  # its range starts in a row the sheet does not have
                continue
            colspan, rowspan = origins.get((i, column), (1, 1))
            cells.append(Cell(texts[column - 1] if column <= len(texts) else "", colspan=colspan, rowspan=rowspan))
        out.append(Row(cells, number=number))
    return out


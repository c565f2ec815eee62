"""Geometry of OCR lines (``ocr.py``): visual rows, a row cut at wide gaps, paragraphs found column
by column, and a table rebuilt from line positions. Boxes are (x0, y0, x1, y1) in the image's
pixels, top-left origin."""

from __future__ import annotations

from .layout import Box
from .ocr import Line, join_lines


def rows(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into visual rows (their vertical extents overlap by half the smaller height),
    rows top to bottom, each row left to right."""
    out: list[list[Line]] = []
    for line in sorted(lines, key=lambda li: (li.box[1] + li.box[3]) / 2):
        if out:
            row = out[-1]
            top, bottom = min(li.box[1] for li in row), max(li.box[3] for li in row)
            shared = min(bottom, line.box[3]) - max(top, line.box[1])
            if shared >= 0.5 * min(line.height, bottom - top):
                row.append(line)
                continue
        out.append([line])
    return [sorted(row, key=lambda li: li.box[0]) for row in out]


def rows_flat(lines: list[Line]) -> list[Line]:
    return [line for row in rows(lines) for line in row]


def paragraphs(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into paragraphs, column by column: a line continues the paragraph whose last
    line is right above it (the boxes overlap horizontally, the gap is under ~0.8 line heights and
    the heights agree); boxes of one row close together (a line the detector split) are one line.
    Paragraphs come in the order of their first line."""
    groups: list[list[Line]] = []
    for piece in (piece for row in rows(lines) for piece in pieces(row)):
        merged = Line(join_lines([li.text for li in piece]), bounds(piece), min(li.score for li in piece))
        best: tuple[float, list[Line]] | None = None
        for group in groups:
            last = group[-1]
            gap = merged.box[1] - last.box[3]
            overlap = min(merged.box[2], last.box[2]) - max(merged.box[0], last.box[0])
            similar = 0.67 <= merged.height / max(last.height, 1.0) <= 1.5
            if overlap > 0 and -0.5 * last.height <= gap <= 0.8 * last.height and similar:
                if best is None or gap < best[0]:
                    best = (gap, group)
        if best is None:
            groups.append([merged])
        else:
            best[1].append(merged)
    return groups


def pieces(row: list[Line]) -> list[list[Line]]:
    """A row cut where the gap between two boxes is wider than 1.5 line heights (two columns, or a
    label and its value far apart); closer boxes are one line the detector split."""
    out = [[row[0]]]
    for line in row[1:]:
        if line.box[0] - out[-1][-1].box[2] > 1.5 * max(line.height, out[-1][-1].height):
            out.append([line])
        else:
            out[-1].append(line)
    return out


def table(lines: list[Line]) -> str | None:
    """A Markdown table from the lines of a table region: rows by position, columns by the
    x-ranges the cells share; None when that gives fewer than two rows or two columns."""
    table_rows = rows(lines)
    spans: list[list[float]] = []
    for line in sorted(lines, key=lambda li: li.box[0]):
        if spans and line.box[0] <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], line.box[2])
        else:
            spans.append([line.box[0], line.box[2]])
    if len(table_rows) < 2 or len(spans) < 2:
        return None
    grid = [["" for _ in spans] for _ in table_rows]
    for r, row in enumerate(table_rows):
        for line in row:
            column = next(i for i, (x0, x1) in enumerate(spans) if x0 <= line.box[0] <= x1)
            grid[r][column] = join_lines([grid[r][column], line.text]) if grid[r][column] else line.text

    def cells(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    return "\n".join([cells(grid[0]), cells(["---"] * len(spans)), *(cells(row) for row in grid[1:])])


def bounds(lines: list[Line]) -> Box:
    return (min(li.box[0] for li in lines), min(li.box[1] for li in lines),
            max(li.box[2] for li in lines), max(li.box[3] for li in lines))

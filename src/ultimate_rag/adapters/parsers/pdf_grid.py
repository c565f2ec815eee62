"""Ruled tables: ruling lines that cross make a grid, and the text inside its cells (pdf_tables.py).

Horizontal and vertical rules are merged where they continue each other, grouped by crossing,
and a group with at least three of each (two rows, two columns) is a grid. Cells between
neighbouring rules whose shared border is not drawn are merged (union-find over grid cells); a
merged cell's text fills every grid cell it covers.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from .pdf_lines import Line, Rule
from .pdf_tables import cell_text, make_table
from .pdf_text import Item

SNAP = 2.0  # points: rules this close are the same line
Segment = tuple[float, float, float]  # position across, start, end along


def ruled_tables(lines: list[Line], rules: list[Rule], page: int) -> tuple[list[Item], list[Line]]:
    """Tables found in the page's grids, and the lines outside them."""
    if len(rules) < 6:
        return [], lines
    horizontal = _merge([((r[1] + r[3]) / 2, r[0], r[2]) for r in rules if r[2] - r[0] > r[3] - r[1]])
    vertical = _merge([((r[0] + r[2]) / 2, r[1], r[3]) for r in rules if r[3] - r[1] >= r[2] - r[0]])
    if len(horizontal) < 3 or len(vertical) < 3:
        return [], lines  # no grid of two rows and two columns (fraction bars, underlines, a frame)
    items: list[Item] = []
    taken: set[int] = set()
    for hs, vs in _groups(horizontal, vertical):
        xs = _positions([v[0] for v in vs])
        ys = _positions([h[0] for h in hs])
        if len(xs) < 3 or len(ys) < 3:
            continue
        inside = [ln for ln in lines if id(ln) not in taken and xs[0] - SNAP <= (ln.x0 + ln.x1) / 2 <= xs[-1] + SNAP
                  and ys[0] - SNAP <= (ln.y0 + ln.y1) / 2 <= ys[-1] + SNAP]
        grid, spanning = _cells(xs, ys, sorted(hs), sorted(vs), inside)
        table = make_table(grid, spanning, page, (xs[0], xs[-1]))
        if table is None:
            continue
        taken.update(id(ln) for ln in inside)
        items.append(Item(xs[0], ys[0], xs[-1], ys[-1], table=table))
    return items, [ln for ln in lines if id(ln) not in taken]


def _merge(segments: list[Segment]) -> list[Segment]:
    """Collinear segments that touch or overlap, as one."""
    out: list[Segment] = []
    for pos, a, b in sorted(segments, key=lambda s: (round(s[0] / SNAP), s[1])):
        if out and abs(out[-1][0] - pos) <= SNAP and a <= out[-1][2] + SNAP:
            last = out[-1]
            out[-1] = (last[0], last[1], max(last[2], b))
        else:
            out.append((pos, a, b))
    return [s for s in out if s[2] - s[1] > SNAP]


def _groups(hs: list[Segment], vs: list[Segment]) -> list[tuple[list[Segment], list[Segment]]]:
    """Horizontal and vertical rules grouped by crossing (connected components)."""
    parent = list(range(len(hs) + len(vs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (y, x0, x1) in enumerate(hs):
        for j, (x, y0, y1) in enumerate(vs):
            if x0 - SNAP <= x <= x1 + SNAP and y0 - SNAP <= y <= y1 + SNAP:
                parent[find(i)] = find(len(hs) + j)
    groups: dict[int, tuple[list[Segment], list[Segment]]] = defaultdict(lambda: ([], []))
    for i, h in enumerate(hs):
        groups[find(i)][0].append(h)
    for j, v in enumerate(vs):
        groups[find(len(hs) + j)][1].append(v)
    return [g for g in groups.values() if len(g[0]) >= 2 and len(g[1]) >= 2]


def _positions(values: list[float]) -> list[float]:
    out: list[float] = []
    for value in sorted(values):
        if not out or value - out[-1] > SNAP:
            out.append(value)
    return out


def _covered(segments: list[Segment], pos: float, a: float, b: float) -> bool:
    """Whether a rule at ``pos`` runs along the middle of the stretch from ``a`` to ``b``
    (``segments`` sorted by position)."""
    mid = (a + b) / 2
    k = bisect_left(segments, (pos - SNAP,))
    while k < len(segments) and segments[k][0] <= pos + SNAP:
        if segments[k][1] - SNAP <= mid <= segments[k][2] + SNAP:
            return True
        k += 1
    return False


def _cells(xs: list[float], ys: list[float], hs: list[Segment], vs: list[Segment],
           lines: list[Line]) -> tuple[list[list[str]], list[bool]]:
    rows, cols = len(ys) - 1, len(xs) - 1
    parent = list(range(rows * cols))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    spanning = [False] * rows
    for i in range(rows):
        for j in range(cols):
            if j + 1 < cols and not _covered(vs, xs[j + 1], ys[i], ys[i + 1]):
                parent[find(i * cols + j + 1)] = find(i * cols + j)
                spanning[i] = True
            if i + 1 < rows and not _covered(hs, ys[i + 1], xs[j], xs[j + 1]):
                parent[find((i + 1) * cols + j)] = find(i * cols + j)
    pieces: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for line in lines:
        for span in line.spans:
            cx, cy = (span.x0 + span.x1) / 2, (span.y0 + span.y1) / 2
            j = _index(xs, cx)
            i = _index(ys, cy)
            pieces[find(i * cols + j)].append((span.y0, span.x0, span.text))
    texts = {root: cell_text(found) for root, found in pieces.items()}
    grid = [[texts.get(find(i * cols + j), "") for j in range(cols)] for i in range(rows)]
    return grid, spanning


def _index(edges: list[float], value: float) -> int:
    """The cell between ``edges`` that holds ``value`` (the first or last when outside)."""
    for k in range(1, len(edges) - 1):
        if value < edges[k]:
            return k - 1
    return len(edges) - 2

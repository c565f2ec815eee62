"""A page read by OCR as structure: its lines (``ocr.py``) placed in the regions the layout model
finds (``layout.py``), then read in order.

* **Reading order**: regions (and the paragraphs of lines outside any region) are read band by
  band, the left column before the right one (``layout.reading_order``), so two-column scans are
  not read line by line across both columns. Inside a region, lines side by side on one row are
  read left to right, rows top to bottom, and a gap or a change of line height starts a new
  paragraph.
* **Titles** become headings (level 1 when at least 1.6× the body's line height, else 2);
  **tables** become Markdown tables (rows by line position, columns by the x-ranges the rows
  share); **figures** become their own image asset, cropped from the page, described by their
  **caption** (a figure caption region next to them); **running headers and footers** (at the
  page's top or bottom edge) and lone page numbers are left out of the text.
* The model runs on a page when its lines suggest structure (``needs_layout``: columns or a table,
  a title, a short line at the top or bottom edge); a page of plain one-column text, or one with
  fewer than ``LAYOUT_MIN_LINES`` lines, skips it (it costs ~0.5 s of CPU a page against ~12 s for
  the OCR itself, bench/RESULTS.md).
"""

from __future__ import annotations

import io
import math
import re
import statistics
from dataclasses import dataclass, field

from PIL import Image

from ultimate_rag.domain.models import Block, ParsedAsset, SourceLocator, figure_text

from . import layout, progress
from .assets import AssetGate
from .layout import Box, Region
from .ocr import Line, join_lines, recognize
from .ocr_lines import bounds, paragraphs, pieces, rows, rows_flat, table

LAYOUT_MIN_LINES = 3
_PAGE_NUMBER = re.compile(r"^[\W_]*(page|p\.|seite|第)?\s*\d{1,4}\s*(页|of\s+\d+)?[\W_]*$", re.IGNORECASE)
_EDGE = 0.12  # headers and footers sit in the top / bottom 12 % of the page
_WHOLE_PAGE = 0.6  # a figure this large a share of the page is not cropped out of it


@dataclass(slots=True)
class OcrPage:
    """The blocks of one page read by OCR (boxes in the page's units), the figure crops they
    name, the furniture left out, and how much text could not be read."""

    blocks: list[Block] = field(default_factory=list)
    assets: list[ParsedAsset] = field(default_factory=list)
    furniture: list[str] = field(default_factory=list)
    unread: int = 0
    foreign_script: bool = False


@dataclass(slots=True)
class _Unit:
    kind: str  # a layout kind, or "text" for paragraphs outside any region
    box: Box
    lines: list[Line]


def read_page(image: Image.Image, page: int, *, scale: float, asset_key: str | None,
              use_layout: bool = True) -> OcrPage:
    """OCR, then layout, of an RGB page image; ``scale`` = image pixels per unit of the page's
    coordinates (boxes in the blocks are divided by it); ``asset_key`` = the page image's asset."""
    progress.doing("OCR")  # a time limit met from here on names OCR and the page
    reading = recognize(image)
    lines = list(reading.lines)
    regions = layout.detect(image) if use_layout and needs_layout(lines, image.height) else []
    out = structure(lines, regions, image, page, scale=scale, asset_key=asset_key)
    out.unread, out.foreign_script = reading.unread, reading.foreign_script
    return out


def needs_layout(lines: list[Line], height: int) -> bool:
    """Whether the page may have structure that line positions alone do not give, so the layout
    model runs: lines side by side far apart (columns, a table), a line much taller than the body
    (a title), or a short line at the page's top or bottom edge (a running header or footer). A
    page of plain body text in one column skips it (~0.5 s of CPU, bench/RESULTS.md)."""
    if len(lines) < LAYOUT_MIN_LINES:
        return False
    body = statistics.median(line.height for line in lines)
    width = statistics.median(line.width for line in lines)
    if any(len(pieces(row)) > 1 for row in rows(lines)):
        return True
    if any(line.height >= 1.3 * body for line in lines):
        return True
    return any(line.width < 0.6 * width and (line.box[3] < _EDGE * height or line.box[1] > (1 - _EDGE) * height)
               for line in lines)


def structure(lines: list[Line], regions: list[Region], image: Image.Image, page: int, *, scale: float,
              asset_key: str | None) -> OcrPage:
    """The blocks of a page from its OCR lines and layout regions (both in the image's pixels)."""
    out = OcrPage()
    units = _units(lines, regions, image.height)
    body = statistics.median(line.height for line in lines) if lines else 1.0
    captions = _captions(units)
    for index in layout.reading_order([u.box for u in units], image.width):
        unit = units[index]
        if unit.kind in ("header", "footer") or _is_page_number(unit, image.height):
            out.furniture.append(join_lines([line.text for line in unit.lines]))
            continue
        if unit.kind == "figure_caption" and id(unit) in captions.values():
            continue  # it describes its figure
        locator = SourceLocator(page=page, bbox=_scaled(unit.box, scale))
        pointer = (asset_key,) if asset_key else ()
        if unit.kind == "figure" and _area(unit.box) >= _WHOLE_PAGE * image.width * image.height:
            if unit.lines:  # a photo or a full-page figure: the page image shows it already
                out.blocks.append(_paragraph(unit.lines, page, scale, pointer))
        elif unit.kind == "figure":
            caption = next((c for c in units if id(c) == captions.get(id(unit))), None)
            out.assets.append(_crop(image, unit.box, page, len(out.assets) + 1, caption))
            out.blocks.append(Block(kind="figure", text=figure_text(out.assets[-1]), locator=locator,
                                    asset_ids=(out.assets[-1].locator_key,)))
            if unit.lines:  # labels inside the picture stay searchable
                out.blocks.append(_paragraph(unit.lines, page, scale, pointer))
        elif unit.kind == "title" and len(unit.lines) <= 3 and sum(len(li.text) for li in unit.lines) <= 160:
            level = 1 if max(li.height for li in unit.lines) >= 1.6 * body else 2
            out.blocks.append(Block(kind="heading", text=join_lines([li.text for li in rows_flat(unit.lines)]),
                                    locator=locator, level=level, asset_ids=pointer))
        elif unit.kind == "table" and (markdown := table(unit.lines)) is not None:
            out.blocks.append(Block(kind="table", text=markdown, locator=locator, asset_ids=pointer))
        else:  # a region the model drew over both columns is still read column by column
            groups = paragraphs(unit.lines)
            order = layout.reading_order([bounds(group) for group in groups], image.width)
            out.blocks.extend(_paragraph(groups[i], page, scale, pointer) for i in order)
    return out


def _units(lines: list[Line], regions: list[Region], height: int) -> list[_Unit]:
    """Every line in the region that holds most of it (the smaller region on a tie); the lines
    outside any region as paragraphs of their own. Regions without lines are kept only when they
    are figures. Headers and footers away from the page's edge are text."""
    units = [_Unit(_edge_kind(r, height), r.box, []) for r in regions]
    loose: list[Line] = []
    for line in lines:
        best: tuple[float, float, int] | None = None
        for index, unit in enumerate(units):
            share = _overlap(line.box, unit.box) / max(line.width * line.height, 1.0)
            area = _area(unit.box)
            if share >= 0.5 and (best is None or (share, -area) > best[:2]):
                best = (share, -area, index)
        if best is None:
            loose.append(line)
        else:
            units[best[2]].lines.append(line)
    kept = [u for u in units if u.lines or u.kind == "figure"]
    kept += [_Unit("text", bounds(group), group) for group in paragraphs(loose)]
    for unit in kept:
        if unit.lines and unit.kind != "figure":  # the box around what was read
            unit.box = bounds(unit.lines)
    return kept


def _edge_kind(region: Region, height: int) -> str:
    """A header or footer is furniture at the page's top or bottom edge (whichever of the two the
    model called it: it sometimes calls a running header a footer), text anywhere else."""
    if region.kind not in ("header", "footer"):
        return region.kind
    if region.box[3] <= _EDGE * height * 1.5:
        return "header"
    return "footer" if region.box[1] >= (1 - _EDGE * 1.5) * height else "text"


def _is_page_number(unit: _Unit, height: int) -> bool:
    """A lone page number ("3", "- 3 -", "Page 3 of 12", "第3页") at the page's top or bottom."""
    if unit.kind not in ("text", "footer", "header") or len(unit.lines) != 1:
        return False
    at_edge = unit.box[3] < _EDGE * height or unit.box[1] > (1 - _EDGE) * height
    return at_edge and bool(_PAGE_NUMBER.match(unit.lines[0].text))


def _captions(units: list[_Unit]) -> dict[int, int]:
    """Figure → its caption: the nearest figure caption below it (or above, counted 1.5× as far)
    that overlaps it horizontally, within a third of the figure's height."""
    pairs: dict[int, int] = {}
    taken: set[int] = set()
    for figure in (u for u in units if u.kind == "figure"):
        best: tuple[float, _Unit] | None = None
        for caption in (u for u in units if u.kind == "figure_caption" and id(u) not in taken):
            if min(figure.box[2], caption.box[2]) - max(figure.box[0], caption.box[0]) <= 0:
                continue
            below = caption.box[1] - figure.box[3]
            gap = below if below >= -5 else (figure.box[1] - caption.box[3]) * 1.5
            if -5 <= gap <= (figure.box[3] - figure.box[1]) / 3 and (best is None or gap < best[0]):
                best = (gap, caption)
        if best is not None:
            pairs[id(figure)] = id(best[1])
            taken.add(id(best[1]))
    return pairs


def _crop(image: Image.Image, box: Box, page: int, number: int, caption: _Unit | None) -> ParsedAsset:
    crop = image.crop((int(box[0]), int(box[1]), math.ceil(box[2]), math.ceil(box[3])))
    buffer = io.BytesIO()
    crop.convert("RGB").save(buffer, "JPEG", quality=85)
    description = join_lines([li.text for li in rows_flat(caption.lines)]) if caption is not None else ""
    return ParsedAsset(locator_key=f"page-{page}/figure-{number}", data=buffer.getvalue(), mime_type="image/jpeg",
                       page=page, description=description)


def _paragraph(lines: list[Line], page: int, scale: float, pointer: tuple[str, ...]) -> Block:
    return Block(kind="paragraph", text=join_lines([line.text for line in lines]),
                 locator=SourceLocator(page=page, bbox=_scaled(bounds(lines), scale)), asset_ids=pointer)


def _area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _overlap(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _scaled(box: Box, scale: float) -> tuple[int, int, int, int]:
    return (int(box[0] / scale), int(box[1] / scale), math.ceil(box[2] / scale), math.ceil(box[3] / scale))


def admitted(result: OcrPage, gate: AssetGate) -> tuple[list[Block], list[ParsedAsset]]:
    """The page's blocks and figure crops as they may be stored: a crop the asset gate refuses
    leaves its figure block out (the page image still shows it)."""
    kept = {asset.locator_key: stored for asset in result.assets
            if (stored := gate.admit(asset, f"figure {asset.locator_key.rsplit('-', 1)[-1]} of page {asset.page}"))
            is not None}
    blocks = [b for b in result.blocks if b.kind != "figure" or all(key in kept for key in b.asset_ids)]
    return blocks, list(kept.values())

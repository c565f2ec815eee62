"""The layout model (``layout.py``) on born-digital PDF pages whose text layer does not give the
structure.

The text layer already gives reading order (columns), headings (font sizes), ruled and unruled
tables and running furniture (pdf.py, pdf_text.py, pdf_tables.py, pdf_furniture.py). What it
cannot give: a figure drawn with vector paths (a chart: no image object, only lines and labels),
which caption belongs to which figure when the caption does not start with "Figure", a table whose
columns are too close together for the aligned-span detector, a title set at body size, and a
header or footer that does not repeat over pages. The model answers those, so it runs on a page
(``layout_reason``) only when the page has a picture (an image that is not the whole page) with
a line right next to it set apart from the body text (a caption that does not say "Figure"), a
caption-like line ("Figure 3", "图 1", "Abbildung 4") with no picture next to it (a vector
figure; "Table 2" where no table was found), or numbers aligned in rows that no table was found
for; a page of running text skips it (it costs
~0.35–0.4 s of CPU a page against a few ms for the text layer, bench/RESULTS.md).

What the model's regions change on such a page (``apply_regions``; boxes in PDF points):

* **figures** without an image object under them become an image asset cropped from the page's
  rendering (``page-N/figure-K``); a figure covering most of the page is not cropped;
* **figure captions** (the model's, else a caption-like text) are joined to the nearest figure:
  the caption is the figure's description and is read right after the figure (``caption_pairs``);
* **table regions** where no table was found are read by the aligned-span detector without its
  prose guards (``pdf_columns.unruled_tables(..., trusted=True)``);
* **titles**: a short text inside a title region is a heading (``Item.title``);
* **headers and footers** at the page's top or bottom edge leave the body for the document's
  ``page_furniture`` metadata.
"""

from __future__ import annotations

import io
import logging
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from PIL import Image

from ultimate_rag.domain.models import ParsedAsset

from . import layout
from .assets import AssetGate
from .layout import Box, Region
from .pdf_columns import unruled_tables
from .pdf_engine import OpenedPdf, render_page
from .pdf_lines import Line
from .pdf_tables import is_number
from .pdf_text import Item, heading_like

log = logging.getLogger(__name__)
RENDER_DPI = 144  # the model sees 608 × 800 pixels; the rendering is also what a figure is cropped from
RENDER_MAX_PIXELS = 3_000_000
MIN_LINES = 3  # a page with fewer lines has no structure to find
MIN_NUMBER_ROWS = 3  # lines with two or more numbers that make a page worth a look for a table
EDGE = 0.08  # headers and footers sit in the top / bottom 8 % of the page
WHOLE_PAGE = 0.6  # a figure or image this large a share of the page is not cropped / captioned
MAX_FURNITURE = 50  # header or footer texts kept in the metadata, at most per side
TEXT_COVER = 0.25  # a figure region whose area is more than this share text lines is text
MAX_CAPTION_GAP = 72.0  # points between a figure and its caption, at most
CAPTION_CLOSE = 24.0  # points: a caption the model is woken for sits this close to its picture
MODEL_CAPTION_CHARS = 120  # a caption only the model recognises is at most this long
# a caption or figure label next to an image: "Figure 3", "Fig. 2:", "图 1", "圖1", "그림 2" (docx.py too)
CAPTION = re.compile(r"^\s*(figure|fig\.|image|photo|chart|diagram|图|圖|그림)\s*\d*", re.IGNORECASE)
# a sentence of body text (a full stop inside or at the end): no caption the model alone may name
_SENTENCE = re.compile(r"\w[.!?]\s+[A-ZÄÖÜ]|\w[.!?]$|[。！？]")
# a line that names a figure, or a table, on the page: the model is worth running there (for a
# table only when the text layer found none)
FIGURE_LINE = re.compile(r"^\s*(figure|fig\.|image|photo|chart|diagram|exhibit|abbildung|abb\.|图|圖|그림)\s*[\dA-Z]",
                         re.IGNORECASE)
TABLE_LINE = re.compile(r"^\s*(table|tab\.|tabelle|表|표)\s*[\dA-Z]", re.IGNORECASE)


def layout_reason(lines: list[Line], tables: list[Item], images: list[Item], size: tuple[float, float]) -> str:
    """Why the model should run on a page ("" when it should not; module docstring)."""
    if len(lines) < MIN_LINES:
        return ""
    area = max(size[0] * size[1], 1.0)
    pictures = [im for im in images if (im.x1 - im.x0) * (im.y1 - im.y0) < WHOLE_PAGE * area]
    if any(_unnamed_caption(im, lines) for im in pictures):
        return "image"
    if any((FIGURE_LINE.match(line.text) and not any(_near(im, line, MAX_CAPTION_GAP) for im in pictures))
           or (not tables and TABLE_LINE.match(line.text)) for line in lines):
        return "caption"
    loose = [ln for ln in lines if _numeric_row(ln)
             and not any(_inside((ln.x0, ln.y0, ln.x1, ln.y1), _box(t)) >= 0.5 for t in tables)]
    return "numbers" if len(loose) >= MIN_NUMBER_ROWS else ""


def _near(image: Item, line: Line, gap: float) -> bool:
    """Whether ``line`` sits right under or over ``image`` (within ``gap`` points), overlapping it sideways."""
    if min(image.x1, line.x1) - max(image.x0, line.x0) <= 0:
        return False
    return -5 <= line.y0 - image.y1 <= gap or -5 <= image.y0 - line.y1 <= gap


def _unnamed_caption(image: Item, lines: list[Line]) -> bool:
    """Whether a picture may have a caption only the model can tell: a line right next to it
    (``CAPTION_CLOSE``) set apart from the body text (another size, or bold) that does not read
    like a caption (those the text layer pairs by itself). A picture with body text around it, or
    with a "Figure 2:" line under it, needs no model (an image on every page costs nothing)."""
    near = [ln for ln in lines if _near(image, ln, CAPTION_CLOSE)]
    if not near or any(CAPTION.match(ln.text) or FIGURE_LINE.match(ln.text) for ln in near):
        return False
    sizes = Counter(round(ln.size, 1) for ln in lines)
    body = sizes.most_common(1)[0][0]
    return any(abs(round(ln.size, 1) - body) >= 0.5 or ln.bold for ln in near)


def _numeric_row(line: Line) -> bool:
    """Two or more spans that are numbers, or one span of mostly numbers (columns set too close
    together for spans: "Q1 120 340 560")."""
    if sum(is_number(span.text) for span in line.spans) >= 2:
        return True
    words = line.text.split()  # an index entry ("Torus, iii, 5, 38") is no row of a table
    return len(line.spans) == 1 and len(words) >= 3 and "," not in line.text and sum(
        is_number(w) for w in words) * 2 >= len(words)


def detect_regions(pdf: OpenedPdf, index: int) -> tuple[list[Region], Image.Image, float] | None:
    """The model's regions of page ``index`` in PDF points, the rendering and its pixels per point;
    None when the page cannot be rendered or the model fails (the text layer alone is read then;
    running out of memory still fails the parse, as it would anywhere)."""
    try:
        image, scale = render_page(pdf, index, dpi=RENDER_DPI, max_pixels=RENDER_MAX_PIXELS)
        found = layout.detect(image)
    except MemoryError:
        raise
    except Exception as exc:  # a page PDFium cannot render, an onnxruntime error: not the document's fault
        log.warning("layout model skipped on page %d: %s: %s", index + 1, exc.__class__.__name__, exc)
        return None
    return [Region(r.kind, (r.box[0] / scale, r.box[1] / scale, r.box[2] / scale, r.box[3] / scale), r.score)
            for r in found], image, scale


def caption_zone(regions: list[Region]) -> Callable[[Line], int]:
    """For ``pdf_text.text_items``: the number of the figure-caption region a line lies (at least
    half) in, 0 outside them, so a caption and the paragraph after it stay apart."""
    boxes = [r.box for r in regions if r.kind == "figure_caption"]

    def zone(line: Line) -> int:
        box = (line.x0, line.y0, line.x1, line.y1)
        return next((k for k, caption in enumerate(boxes, start=1) if _inside(box, caption) >= 0.5), 0)

    return zone


def lines_in(regions: list[Region], kind: str, lines: list[Line]) -> list[tuple[Region, list[Line]]]:
    """For each region of ``kind``: the lines at least half inside it."""
    return [(r, [ln for ln in lines if _inside((ln.x0, ln.y0, ln.x1, ln.y1), r.box) >= 0.5])
            for r in regions if r.kind == kind]


def table_regions(regions: list[Region], tables: list[Item], lines: list[Line], page: int,
                  width: float) -> tuple[list[Item], list[Line]]:
    """Tables in the model's table regions where the text layer found none: the lines inside read
    as an unruled table without its prose guards. The tables, and the lines not in one."""
    found: list[Item] = []
    taken: set[int] = set()
    for region, inside in lines_in(regions, "table", lines):
        if len(inside) < 2 or any(_inside(_box(t), region.box) >= 0.5 or _inside(region.box, _box(t)) >= 0.5
                                  for t in tables + found):
            continue
        more, rest = unruled_tables(inside, page, width, trusted=True)
        found += more
        left = {id(ln) for ln in rest}
        taken.update(id(ln) for ln in inside if id(ln) not in left)
    return found, [ln for ln in lines if id(ln) not in taken]


def vector_figures(regions: list[Region], images: list[Item], tables: list[Item], lines: list[Line],
                   image: Image.Image, scale: float, page: int, size: tuple[float, float],
                   gate: AssetGate) -> list[Item]:
    """Figures the model sees where no image object is drawn (charts, diagrams drawn with paths):
    each cropped from the rendering as an image asset, admitted by the asset gate. A region that
    is mostly text (``TEXT_COVER``: the model takes a block of formulas or coloured text for a
    figure now and then) is not a figure: its text is read as text."""
    out: list[Item] = []
    area = max(size[0] * size[1], 1.0)
    for region in (r for r in regions if r.kind == "figure"):
        box = region.box
        if _area(box) >= WHOLE_PAGE * area or _area(box) < 0.01 * area:
            continue
        if any(_inside(box, _box(it)) >= 0.3 or _inside(_box(it), box) >= 0.5 for it in images + tables):
            continue
        text = sum(_inside(line, box) * _area(line) for line in ((ln.x0, ln.y0, ln.x1, ln.y1) for ln in lines))
        if text > TEXT_COVER * _area(box):
            continue
        crop = image.crop((int(box[0] * scale), int(box[1] * scale), math.ceil(box[2] * scale),
                           math.ceil(box[3] * scale)))
        buffer = io.BytesIO()
        crop.convert("RGB").save(buffer, "JPEG", quality=85)
        number = len(out) + 1
        asset = gate.admit(ParsedAsset(locator_key=f"page-{page}/figure-{number}", data=buffer.getvalue(),
                                       mime_type="image/jpeg", page=page), f"figure {number} of page {page}")
        if asset is not None:
            out.append(Item(*box, asset=asset))
    return out


def figure_labels(figures: list[Item], texts: list[Item]) -> list[Item]:
    """The texts inside each vector figure (axis labels, legends) as one text of the figure's
    labels, so they stay searchable but are not read as scattered paragraphs."""
    out = list(texts)
    for figure in figures:
        if figure.asset is None or "/figure-" not in figure.asset.locator_key:
            continue
        inside = [it for it in out if it.table is None and _inside(_box(it), _box(figure)) >= 0.5]
        if len(inside) < 2:
            continue
        inside.sort(key=lambda it: (round(it.y0), it.x0))
        ids = {id(it) for it in inside}
        out = [it for it in out if id(it) not in ids]
        out.append(Item(min(it.x0 for it in inside), min(it.y0 for it in inside), max(it.x1 for it in inside),
                        max(it.y1 for it in inside), text=" ".join(it.text for it in inside),
                        size=min(it.size for it in inside)))
    return out


def mark_titles(regions: list[Region], texts: list[Item]) -> None:
    """A short text at least half inside a title region reads as a heading (``Item.title``)."""
    for region in (r for r in regions if r.kind == "title"):
        for item in texts:
            if _inside(_box(item), region.box) >= 0.5 and heading_like(item.text) and len(item.text) <= 160:
                item.title = True


def edge_furniture(regions: list[Region], texts: list[Item], height: float) -> tuple[list[Item], dict[str, list[str]]]:
    """Texts inside a header region at the page's top edge or a footer region at its bottom (the
    model sometimes calls one the other: the edge decides) out of the body, by side."""
    found: dict[str, list[str]] = {"headers": [], "footers": []}
    out: list[Item] = []
    edges = [r.box for r in regions if r.kind in ("header", "footer")]
    for item in texts:
        box = _box(item)
        side = "headers" if item.y1 <= EDGE * height else "footers" if item.y0 >= (1 - EDGE) * height else ""
        if side and len(item.text) <= 160 and any(_inside(box, edge) >= 0.5 for edge in edges):
            found[side].append(item.text)
        else:
            out.append(item)
    return out, found


def add_furniture(metadata: dict[str, object], found: dict[str, list[str]]) -> None:
    """Headers and footers the model found added to the document's ``page_furniture`` (each text once)."""
    if not any(found.values()):
        return
    current = metadata.get("page_furniture")
    listed: dict[str, object] = dict(current) if isinstance(current, dict) else {"page_numbers": 0}
    for side, texts in found.items():
        before = listed.get(side)
        kept = [str(t) for t in before] if isinstance(before, list) else []
        kept += [t for t in dict.fromkeys(texts) if t not in kept]
        if kept:
            listed[side] = kept[:MAX_FURNITURE]
    metadata["page_furniture"] = listed


def caption_pairs(regions: list[Region], figures: list[Item], texts: list[Item],
                  size: tuple[float, float]) -> list[tuple[Item, Item]]:
    """Each figure (an image or a vector figure, not the whole page) with its caption: the nearest
    text below it (or above it, counted 1.5× as far), overlapping it sideways, no further than
    ``MAX_CAPTION_GAP``, that reads like a caption ("Figure 2", "Abbildung 3") or, failing that,
    a short text in a figure caption region of the model (the model alone sometimes takes a
    sentence under a figure for its caption). The caption becomes the figure's description."""
    captions = [r.box for r in regions if r.kind == "figure_caption"]
    candidates: list[tuple[int, Item]] = []  # (0: reads like a caption, 1: only the model says so; the text)
    for it in texts:
        if len(it.text) > 300 or it.table is not None:
            continue
        if CAPTION.match(it.text) or FIGURE_LINE.match(it.text):
            candidates.append((0, it))
        elif len(it.text) <= MODEL_CAPTION_CHARS and not _SENTENCE.search(it.text) and any(
                _inside(_box(it), c) >= 0.5 for c in captions):
            candidates.append((1, it))
    area = max(size[0] * size[1], 1.0)
    pairs: list[tuple[Item, Item]] = []
    taken: set[int] = set()
    for figure in figures:
        if figure.asset is None or _area(_box(figure)) >= WHOLE_PAGE * area:
            continue
        best: tuple[int, float, Item] | None = None
        for rank, item in candidates:
            if id(item) in taken or min(figure.x1, item.x1) - max(figure.x0, item.x0) <= 0:
                continue
            gap = item.y0 - figure.y1 if item.y0 >= figure.y1 - 5 else (figure.y0 - item.y1) * 1.5
            if -5 <= gap <= MAX_CAPTION_GAP and (best is None or (rank, gap) < best[:2]):
                best = (rank, gap, item)
        if best is not None:
            taken.add(id(best[2]))
            figure.asset = replace(figure.asset, description=best[2].text)
            pairs.append((figure, best[2]))
    return pairs


def captions_after_figures(order: list[Item], pairs: list[tuple[Item, Item]]) -> list[Item]:
    """The page's items in reading order with each caption moved right after its figure."""
    moved = {id(caption) for _, caption in pairs}
    after = {id(figure): caption for figure, caption in pairs}
    out: list[Item] = []
    for item in order:
        if id(item) in moved:
            continue
        out.append(item)
        if id(item) in after:
            out.append(after[id(item)])
    return out


def _box(item: Item) -> Box:
    return item.x0, item.y0, item.x1, item.y1


def _area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _inside(box: Box, region: Box) -> float:
    """The share of ``box`` that lies inside ``region`` (a box without area: 1 when its centre does)."""
    area = _area(box)
    if area <= 0:
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        return 1.0 if region[0] <= cx <= region[2] and region[1] <= cy <= region[3] else 0.0
    overlap = max(0.0, min(box[2], region[2]) - max(box[0], region[0])) * max(
        0.0, min(box[3], region[3]) - max(box[1], region[1]))
    return overlap / area

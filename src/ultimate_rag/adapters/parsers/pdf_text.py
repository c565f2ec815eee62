"""PDF text blocks and which of them are headings.

A heading is a short label in a font clearly larger than the body text. Size alone is not enough
(pymupdf's chinese-tables.pdf sets its body paragraphs larger than the dominant table font;
cython.pdf's title page sets authors and the date in large type), so a larger-font text is a
heading only when it also reads like a label (``heading_like``): it has letters, is short, is not
a sentence (no sentence punctuation inside or at its end, no CJK comma or full stop), not a list
of names (two commas or more) and holds no e-mail address or URL. On the first page that has
text, when it has no body-size text at all (a title page), only the largest text is a heading.
Consecutive larger-font lines of one size that sit right under each other are read as one text
first (a title set over several lines is one heading and keeps all of them). A one-line label at
body size is a heading of the lowest level when it is numbered like a section ("1.2 Scope",
"二、授信情况") or set in bold in a text that is mostly not bold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from ultimate_rag.domain.models import ParsedAsset

from .pdf_lines import Line, is_cjk

if TYPE_CHECKING:
    from .pdf_tables import Table

HEADING_RATIO = 1.125
MAX_HEADING_CHARS = 160
MAX_HEADING_WORDS = 20
MAX_HEADING_CJK = 40
COLUMN_GAP = 2.0  # font sizes: spans of one line further apart than this are read as separate texts
_PITCH_SAMPLES = 4  # line-to-line distances needed to know a page's usual line pitch for a size
_PITCH_LIMIT = 1.75  # font sizes from one line to the next in a paragraph, when the usual pitch is unknown
_SENTENCE_INSIDE = re.compile(r"[a-z]{2}[.!?]\s+[A-Z]|[，。！？；]")  # "1. Introduction" is no sentence
_CONTINUES = (",", ";", "-", "–", "、")
MAX_LABEL_CHARS = 60
_SECTION_NUMBER = re.compile(r"^(\d+(\.\d+)+\.?\s+\S|[一二三四五六七八九十]+、|[（(][一二三四五六七八九十]+[）)]|"
                             r"第[一二三四五六七八九十百\d]+[章节條条部篇])")
_CONTACT = re.compile(r"\S@\S|https?://|www\.", re.IGNORECASE)


@dataclass(slots=True)
class Item:
    """A text block, a table or an image on a page, positioned for reading order."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str = ""
    size: float = 0.0
    bold: bool = False
    asset: ParsedAsset | None = None  # an image
    heading: int = 0  # the heading level, 0 for body text
    table: Table | None = None  # a table (pdf_tables.py); ``text`` is then empty
    title: bool = False  # the layout model drew a title region around it (pdf_layout.py)


def text_items(lines: list[Line], zone: Callable[[Line], int] | None = None) -> list[Item]:
    """Lines grouped into blocks (paragraphs): a line joins the block whose last line sits right
    above it (no further than the page's usual line pitch for its size, ``_pitches``),
    overlapping it sideways, in the same font size. Spans of a line further apart than
    ``COLUMN_GAP`` font sizes (two columns, or a label and its value far apart) are separate texts
    first. The last few open blocks are candidates, so columns drawn line by line across the page
    still make one block per column. ``zone``: lines in different zones never join (the layout
    model's caption regions, pdf_layout.py: a caption is not run into the paragraph after it)."""
    pieces = [piece for line in lines for piece in _pieces(line)]
    pitches = _pitches(pieces)
    blocks: list[list[Line]] = []
    zones = {id(piece): zone(piece) for piece in pieces} if zone is not None else {}
    for piece in pieces:
        here = zones.get(id(piece), 0)
        target = next((block for block in reversed(blocks[-6:]) if _follows(block[-1], piece, pitches)
                       and zones.get(id(block[-1]), 0) == here), None)
        if target is None:
            blocks.append([piece])
        else:
            target.append(piece)
    return [_item(block) for block in blocks]


def _pitches(lines: list[Line]) -> dict[float, float]:
    """The usual distance from one line to the next for each font size on the page (the most
    common one, when it was seen at least ``_PITCH_SAMPLES`` times)."""
    seen: dict[float, Counter[float]] = {}
    for prev, line in pairwise(lines):
        pitch = line.y1 - prev.y1
        if prev.size == line.size and 0 < pitch <= 3 * line.size and min(prev.x1, line.x1) > max(prev.x0, line.x0):
            seen.setdefault(line.size, Counter())[round(pitch * 2) / 2] += 1
    return {size: counts.most_common(1)[0][0] for size, counts in seen.items()
            if counts.most_common(1)[0][1] >= _PITCH_SAMPLES}


def _pieces(line: Line) -> list[Line]:
    groups: list[list[int]] = [[0]]
    for i in range(1, len(line.spans)):
        prev, span = line.spans[i - 1], line.spans[i]
        if span.x0 - prev.x1 >= COLUMN_GAP * max(prev.size, span.size, 1.0):
            groups.append([i])
        else:
            groups[-1].append(i)
    if len(groups) == 1:
        return [line]
    out = []
    for group in groups:
        spans = [line.spans[i] for i in group]
        sizes: Counter[float] = Counter()
        for span in spans:
            sizes[span.size] += len(span.text)
        out.append(Line(min(s.x0 for s in spans), min(s.y0 for s in spans), max(s.x1 for s in spans),
                        max(s.y1 for s in spans), spans, sizes.most_common(1)[0][0], line.bold))
    return out


def _follows(prev: Line, line: Line, pitches: dict[float, float]) -> bool:
    size = max(prev.size, line.size, 1.0)
    if abs(prev.size - line.size) > 0.08 * size:
        return False
    if min(prev.y1, line.y1) - max(prev.y0, line.y0) >= 0.5 * min(prev.height, line.height):
        return min(prev.x1, line.x1) > max(prev.x0, line.x0)  # text drawn over text on the same row
    if line.y0 - prev.y1 < -0.3 * size:
        return False
    usual = pitches.get(line.size)
    if line.y1 - prev.y1 > (1.15 * usual if usual else _PITCH_LIMIT * size):
        return False
    return min(prev.x1, line.x1) > max(prev.x0, line.x0) or abs(line.x0 - prev.x0) <= 2 * size


def _item(lines: list[Line]) -> Item:
    sizes: Counter[float] = Counter()
    bold = 0
    for line in lines:
        n = len(line.text)
        sizes[line.size] += n
        bold += n if line.bold else 0
    return Item(min(ln.x0 for ln in lines), min(ln.y0 for ln in lines), max(ln.x1 for ln in lines),
                max(ln.y1 for ln in lines), text=join_lines([ln.text for ln in lines]),
                size=sizes.most_common(1)[0][0], bold=bold * 2 > sum(sizes.values()))


def join_lines(lines: list[str]) -> str:
    """Lines of one block joined: a hyphen at a line end rejoins the word; CJK lines join tight."""
    out = ""
    for line in lines:
        if not out:
            out = line
        elif out.endswith("-") and line[:1].islower():
            out = out[:-1] + line
        elif is_cjk(out[-1]) or is_cjk(line[0]):
            out += line
        else:
            out += " " + line
    return out.strip()


def heading_like(text: str) -> bool:
    """Whether a larger-font text reads like a label rather than body text (module docstring)."""
    text = text.strip()
    if not any(ch.isalpha() for ch in text) or len(text) > MAX_HEADING_CHARS:
        return False
    cjk = sum(1 for ch in text if is_cjk(ch))
    if cjk > MAX_HEADING_CJK or len(text.split()) > MAX_HEADING_WORDS:
        return False
    if _SENTENCE_INSIDE.search(text) or _CONTACT.search(text) or text.count(",") >= 2:
        return False
    if text.endswith(_CONTINUES):
        return False
    return not (text[-1] in ".!:" and len(text.split()) >= 3)  # a question is a heading ("What is Cython?")


def mark_headings(pages: list[list[Item]]) -> list[list[Item]]:
    """Merge multi-line large-font texts, then set ``heading`` on the items that are headings
    (module docstring); images pass through."""
    body = _body_size([it for page in pages for it in page if it.asset is None and it.table is None])
    if body <= 0:
        return pages
    pages = [_merge_large_lines(page, body * HEADING_RATIO) for page in pages]
    texts = [it for page in pages for it in page if it.asset is None and it.table is None]
    candidates = {id(it) for page in pages for it in page if it.asset is None and it.size >= body * HEADING_RATIO
                  and heading_like(it.text) and not _in_a_row(it, page)}
    first = next((page for page in pages if any(it.asset is None for it in page)), [])
    first_texts = [it for it in first if it.asset is None]
    if first_texts and all(it.size >= body * HEADING_RATIO for it in first_texts):
        largest = max(it.size for it in first_texts)
        candidates -= {id(it) for it in first_texts if it.size < largest}
    sizes = sorted({it.size for it in texts if id(it) in candidates}, reverse=True)[:6]
    levels = {size: level for level, size in enumerate(sizes, start=1)}
    labels = _labels(pages, texts, body, candidates)
    for it in texts:
        it.heading = levels.get(it.size, 0) if id(it) in candidates else 0
        if id(it) in labels:
            it.heading = min(len(sizes) + 1, 6)
    return pages


def _labels(pages: list[list[Item]], texts: list[Item], body: float, candidates: set[int]) -> set[int]:
    """Body-size headings: a one-line label that is numbered like a section ("1.2 Scope",
    "二、授信情况", "（一）", "第三章") or set in bold where little of the text is bold, and a text
    the layout model found in a title region (``Item.title``, already checked to read like one)."""
    bold_share = sum(len(it.text) for it in texts if it.bold) / max(1, sum(len(it.text) for it in texts))
    found = set()
    for page in pages:
        for it in page:
            if it.asset is not None or it.table is not None or id(it) in candidates:
                continue
            if it.title and not _in_a_row(it, page):
                found.add(id(it))  # the layout model saw a title there (pdf_layout.py)
                continue
            if it.size < 0.95 * body:
                continue
            if it.y1 - it.y0 > 2.0 * max(it.size, 1.0) or len(it.text) > MAX_LABEL_CHARS or not heading_like(it.text):
                continue
            if (_SECTION_NUMBER.match(it.text) or (it.bold and bold_share < 0.3)) and not _in_a_row(it, page):
                found.add(id(it))
    return found


def _in_a_row(item: Item, page: list[Item]) -> bool:
    """Whether another text sits beside ``item`` on the same line, well apart: a table cell."""
    tolerance = 0.3 * item.size
    return any(other is not item and other.asset is None and abs(other.y0 - item.y0) <= tolerance
               and abs(other.y1 - item.y1) <= tolerance
               and max(other.x0 - item.x1, item.x0 - other.x1) >= 1.5 * item.size for other in page)


def _merge_large_lines(items: list[Item], large: float) -> list[Item]:
    """Consecutive larger-than-body texts of one size, set right under each other, become one."""
    out: list[Item] = []
    for it in items:
        prev = out[-1] if out else None
        if (prev is not None and it.asset is None and prev.asset is None and it.size >= large
                and prev.size == it.size and -0.5 * it.size <= it.y0 - prev.y1 <= 0.6 * it.size
                and min(prev.x1, it.x1) > max(prev.x0, it.x0)):
            prev.text = join_lines([prev.text, it.text])
            prev.x0, prev.x1, prev.y1 = min(prev.x0, it.x0), max(prev.x1, it.x1), it.y1
        else:
            out.append(it)
    return out


def _body_size(items: list[Item]) -> float:
    sizes: Counter[float] = Counter()
    for item in items:
        sizes[item.size] += len(item.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0

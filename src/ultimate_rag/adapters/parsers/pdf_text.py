"""PDF text blocks and which of them are headings.

A heading is a short label in a font clearly larger than the body text. Size alone is not enough
(pymupdf's chinese-tables.pdf sets its body paragraphs larger than the dominant table font;
cython.pdf's title page sets authors and the date in large type), so a larger-font text is a
heading only when it also reads like a label (``heading_like``): it has letters, is short, is not
a sentence (no sentence punctuation inside or at its end, no CJK comma or full stop), not a list
of names (two commas or more) and holds no e-mail address or URL. On the first page that has
text, when it has no body-size text at all (a title page), only the largest text is a heading.
Consecutive larger-font lines of one size that sit right under each other are read as one text
first (a title set over several lines is one heading and keeps all of them).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pymupdf

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import ParsedAsset

HEADING_RATIO = 1.15
MAX_HEADING_CHARS = 160
MAX_HEADING_WORDS = 20
MAX_HEADING_CJK = 40
_SENTENCE_INSIDE = re.compile(r"[a-z]{2}[.!?]\s+[A-Z]|[，。！？；]")  # "1. Introduction" is no sentence
_CONTINUES = (",", ";", "-", "–", "、")
_CONTACT = re.compile(r"\S@\S|https?://|www\.", re.IGNORECASE)


@dataclass(slots=True)
class Item:
    """A text block or an image on a page, positioned for reading order."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str = ""
    size: float = 0.0
    bold: bool = False
    asset: ParsedAsset | None = None  # an image
    heading: int = 0  # the heading level, 0 for body text


def text_items(page: pymupdf.Page) -> list[Item]:
    """Text blocks as MuPDF groups them, except that a block whose lines sit in two columns side
    by side (MuPDF joins lines that share a baseline) is split into one item per column."""
    items: list[Item] = []
    try:
        data = page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)
    except Exception as exc:
        raise InvalidDocumentError(f"page {page.number + 1} of the PDF is damaged and cannot be read") from exc
    mid = page.rect.width / 2
    for block in data.get("blocks", ()):
        if block.get("type") != 0:
            continue
        lines = [line for line in block.get("lines", ()) if "".join(
            span.get("text", "") for span in line.get("spans", ())).strip()]
        if not lines:
            continue
        crosses = any(line["bbox"][0] < mid <= line["bbox"][2] for line in lines)
        groups: dict[int, list[dict[str, Any]]] = {}
        for line in lines:
            side = 0 if crosses or (line["bbox"][0] + line["bbox"][2]) / 2 < mid else 1
            groups.setdefault(side, []).append(line)
        for group in groups.values():
            item = _item(group)
            if item is not None:
                items.append(item)
    return items


def _item(lines: list[dict[str, Any]]) -> Item | None:
    texts: list[str] = []
    sizes: Counter[float] = Counter()
    bold = 0
    for line in lines:
        spans = line.get("spans", ())
        texts.append("".join(span.get("text", "") for span in spans).strip())
        for span in spans:
            n = len(span.get("text", "").strip())
            sizes[round(span.get("size", 0.0), 1)] += n
            bold += n if span.get("flags", 0) & 16 else 0
    text = join_lines([t for t in texts if t])
    if not text:
        return None
    x0 = min(line["bbox"][0] for line in lines)
    y0 = min(line["bbox"][1] for line in lines)
    x1 = max(line["bbox"][2] for line in lines)
    y1 = max(line["bbox"][3] for line in lines)
    size = sizes.most_common(1)[0][0] if sizes else 0.0
    return Item(x0, y0, x1, y1, text=text, size=size, bold=bold * 2 > sum(sizes.values()))


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


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0xFF00 <= code <= 0xFFEF


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
    return not (text[-1] in ".!?:" and len(text.split()) >= 3)


def mark_headings(pages: list[list[Item]]) -> list[list[Item]]:
    """Merge multi-line large-font texts, then set ``heading`` on the items that are headings
    (module docstring); images pass through."""
    body = _body_size([it for page in pages for it in page if it.asset is None])
    if body <= 0:
        return pages
    pages = [_merge_large_lines(page, body * HEADING_RATIO) for page in pages]
    texts = [it for page in pages for it in page if it.asset is None]
    candidates = {id(it) for page in pages for it in page if it.asset is None and it.size >= body * HEADING_RATIO
                  and heading_like(it.text) and not _in_a_row(it, page)}
    first = next((page for page in pages if any(it.asset is None for it in page)), [])
    first_texts = [it for it in first if it.asset is None]
    if first_texts and all(it.size >= body * HEADING_RATIO for it in first_texts):
        largest = max(it.size for it in first_texts)
        candidates -= {id(it) for it in first_texts if it.size < largest}
    sizes = sorted({it.size for it in texts if id(it) in candidates}, reverse=True)[:6]
    levels = {size: level for level, size in enumerate(sizes, start=1)}
    for it in texts:
        it.heading = levels.get(it.size, 0) if id(it) in candidates else 0
    return pages


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

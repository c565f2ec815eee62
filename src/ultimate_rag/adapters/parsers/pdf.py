"""PDF parser on PyMuPDF (MuPDF): text per page in a column-aware reading order, headings from
font sizes, and embedded images as assets with their original bytes, page and position.

Why PyMuPDF and not pypdf: see docs/formats.md (speed, original image bytes; AGPL noted there).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

import pymupdf

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator

from .assets import AssetGate, with_warnings
from .limits import ParseLimits
from .pdf_images import page_images

PDF_KIND = "binary:application/pdf"
# A caption or figure label next to an image: "Figure 3", "Fig. 2:", "图 1", "圖1", "그림 2".
CAPTION = re.compile(r"^\s*(figure|fig\.|image|photo|chart|diagram|图|圖|그림)\s*\d*", re.IGNORECASE)
_HEADING_RATIO = 1.15
_MAX_HEADING_CHARS = 200


@dataclass(slots=True)
class _Item:
    """A text block or an image on a page, positioned for reading order."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str = ""
    size: float = 0.0
    bold: bool = False
    asset: ParsedAsset | None = None


class PdfParser:
    name = "pdf"
    version = "1.0.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        # The extension must agree with the content (a PDF named .md is refused, not guessed at);
        # bytes that start like a PDF but hold no object at all are not a PDF anything can read.
        return detected_kind == PDF_KIND and source.extension == ".pdf" and b"obj" in source.content

    def parse(self, source: DocumentSource) -> ParsedDocument:
        doc = _open(source.content)
        gate = AssetGate(self.limits)
        try:
            pages = self._pages(doc, gate)
            metadata = {k: v for k, v in (doc.metadata or {}).items() if v and k in ("title", "author", "subject")}
            metadata["page_count"] = doc.page_count
        finally:
            doc.close()
        body = _body_size([item for page in pages for item in page])
        levels = _heading_levels([item for page in pages for item in page], body)
        blocks: list[Block] = []
        assets: list[ParsedAsset] = []
        for number, items in enumerate(pages, start=1):
            for item in items:
                locator = SourceLocator(page=number)
                if item.asset is not None:
                    assets.append(item.asset)
                    blocks.append(Block(kind="figure", text=figure_text(item.asset), locator=locator,
                                        asset_ids=(item.asset.locator_key,)))
                elif item.size in levels and len(item.text) <= _MAX_HEADING_CHARS and "\n" not in item.text:
                    blocks.append(Block(kind="heading", text=item.text, locator=locator, level=levels[item.size]))
                else:
                    blocks.append(Block(kind="paragraph", text=item.text, locator=locator))
        if not any(b.text.strip() for b in blocks if b.kind != "figure") and not assets:
            raise InvalidDocumentError("the PDF has no extractable text (it may be scanned images only)")
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, gate.warnings),
                              assets=tuple(assets))

    def _pages(self, doc: pymupdf.Document, gate: AssetGate) -> list[list[_Item]]:
        if doc.page_count > self.limits.max_pages:
            raise InvalidDocumentError(
                f"the PDF has {doc.page_count} pages, more than the limit of {self.limits.max_pages}")
        pages: list[list[_Item]] = []
        for index in range(doc.page_count):
            page = doc[index]
            items = _text_items(page)
            # per image and per document asset limits: assets.AssetGate (warns, or fails the document)
            images = [_Item(*rect, asset=asset) for rect, asset in page_images(doc, page, index + 1, gate)]
            for image in images:
                _attach_caption(image, items)
            pages.append(reading_order(items + images, page.rect.width))
        return pages


def figure_text(asset: ParsedAsset) -> str:
    """What a chunk says where an image sits: its description (vision, alt text or caption)."""
    page = f" on page {asset.page}" if asset.page else ""
    return f"[Image{page}: {asset.description}]" if asset.description else f"[Image{page}]"


def _open(content: bytes) -> pymupdf.Document:
    try:
        doc = pymupdf.open(stream=content, filetype="pdf")
    except Exception as exc:
        raise InvalidDocumentError(f"the PDF is corrupt or truncated and cannot be opened ({exc})"[:300]) from exc
    if doc.needs_pass and not doc.authenticate(""):
        doc.close()
        raise InvalidDocumentError("the PDF is encrypted with a password; upload it without the password")
    if doc.page_count == 0:
        doc.close()
        raise InvalidDocumentError("the PDF is corrupt or truncated: it has no readable pages")
    return doc


def _text_items(page: pymupdf.Page) -> list[_Item]:
    """Text blocks as MuPDF groups them, except that a block whose lines sit in two columns side
    by side (MuPDF joins lines that share a baseline) is split into one item per column."""
    items: list[_Item] = []
    try:
        data = page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)
    except Exception as exc:
        raise InvalidDocumentError(f"page {page.number + 1} of the PDF cannot be read ({exc})"[:300]) from exc
    mid = page.rect.width / 2
    for block in data.get("blocks", ()):
        if block.get("type") != 0:
            continue
        lines = [line for line in block.get("lines", ()) if "".join(
            span.get("text", "") for span in line.get("spans", ())).strip()]
        if not lines:
            continue
        crosses = any(line["bbox"][0] < mid <= line["bbox"][2] for line in lines)
        groups: dict[int, list[dict]] = {}
        for line in lines:
            side = 0 if crosses or (line["bbox"][0] + line["bbox"][2]) / 2 < mid else 1
            groups.setdefault(side, []).append(line)
        for group in groups.values():
            item = _item(group)
            if item is not None:
                items.append(item)
    return items


def _item(lines: list[dict]) -> _Item | None:  # type: ignore[type-arg]
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
    text = _join_lines([t for t in texts if t])
    if not text:
        return None
    x0 = min(line["bbox"][0] for line in lines)
    y0 = min(line["bbox"][1] for line in lines)
    x1 = max(line["bbox"][2] for line in lines)
    y1 = max(line["bbox"][3] for line in lines)
    size = sizes.most_common(1)[0][0] if sizes else 0.0
    return _Item(x0, y0, x1, y1, text=text, size=size, bold=bold * 2 > sum(sizes.values()))


def _join_lines(lines: list[str]) -> str:
    """Lines of one block joined: a hyphen at a line end rejoins the word; CJK lines join tight."""
    out = ""
    for line in lines:
        if not out:
            out = line
        elif out.endswith("-") and line[:1].islower():
            out = out[:-1] + line
        elif _is_cjk(out[-1]) or _is_cjk(line[0]):
            out += line
        else:
            out += " " + line
    return out.strip()


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0xFF00 <= code <= 0xFFEF


def _attach_caption(image: _Item, items: list[_Item]) -> None:
    """Use the nearest caption-like text block (below first, then above) as the description."""
    assert image.asset is not None
    best: tuple[float, str] | None = None
    for item in items:
        if not CAPTION.match(item.text) or len(item.text) > 300:
            continue
        overlap = min(image.x1, item.x1) - max(image.x0, item.x0)
        if overlap <= 0:
            continue
        gap = item.y0 - image.y1 if item.y0 >= image.y1 - 1 else (image.y0 - item.y1) * 1.5
        if gap < -1 or gap > 72:
            continue
        if best is None or gap < best[0]:
            best = (gap, item.text)
    if best is not None:
        image.asset = replace(image.asset, description=best[1])


def reading_order(items: list[_Item], page_width: float) -> list[_Item]:
    """Column-aware order: full-width blocks split the page into bands; inside a band, narrow
    blocks are read column by column (left column top to bottom, then the right one)."""
    if not items:
        return []
    mid = page_width / 2
    ordered: list[_Item] = []
    band: list[_Item] = []

    def flush() -> None:
        band.sort(key=lambda it: (0 if (it.x0 + it.x1) / 2 < mid else 1, it.y0, it.x0))
        ordered.extend(band)
        band.clear()

    for item in sorted(items, key=lambda it: (round(it.y0, 1), it.x0)):
        full_width = item.x0 < mid - 0.05 * page_width and item.x1 > mid + 0.05 * page_width
        if full_width:
            flush()
            ordered.append(item)
        else:
            band.append(item)
    flush()
    return ordered


def _body_size(items: list[_Item]) -> float:
    sizes: Counter[float] = Counter()
    for item in items:
        if item.asset is None:
            sizes[item.size] += len(item.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _heading_levels(items: list[_Item], body: float) -> dict[float, int]:
    """Font sizes clearly larger than the body text are headings; the largest is level 1."""
    if body <= 0:
        return {}
    larger = sorted({it.size for it in items if it.asset is None and it.size >= body * _HEADING_RATIO
                     and len(it.text) <= _MAX_HEADING_CHARS}, reverse=True)
    return {size: min(level, 6) for level, size in enumerate(larger[:6], start=1)}

"""PDF parser on PyMuPDF (MuPDF): text per page in a column-aware reading order, headings from
font sizes (pdf_text.py), and embedded images as assets with their original bytes, page and
position. Pages without a text layer (scans) and pages whose text layer cannot be read are read
by OCR (pdf_ocr.py; or left out, text_quality.py, when OCR is off); a file MuPDF
cannot open, or in which it finds no pages, is read by pypdf instead (pdf_fallback.py).

Why PyMuPDF first and not pypdf: see docs/formats.md (speed, original image bytes; AGPL noted there).
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace

import pymupdf

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator, figure_text

from . import progress
from .assets import AssetGate, with_warnings
from .limits import ParseLimits
from .pdf_fallback import ENCRYPTED, PAGE_TREE_WARNING, parse_with_pypdf, rebuild_page_tree
from .pdf_images import page_images
from .pdf_ocr import needs_ocr, ocr_page, ocr_warnings
from .pdf_text import Item as _Item
from .pdf_text import mark_headings, text_items
from .properties import pdf_properties
from .text_quality import UNREADABLE_REASON, is_unreadable, page_is_unreadable, page_ranges, unreadable_warnings

log = logging.getLogger(__name__)

PDF_KIND = "binary:application/pdf"
# A caption or figure label next to an image: "Figure 3", "Fig. 2:", "图 1", "圖1", "그림 2".
CAPTION = re.compile(r"^\s*(figure|fig\.|image|photo|chart|diagram|图|圖|그림)\s*\d*", re.IGNORECASE)


class PdfParser:
    extensions = (".pdf",)
    name = "pdf"
    version = "1.2.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        # The extension must agree with the content (a PDF named .md is refused, not guessed at);
        # bytes that start like a PDF but hold no object at all are not a PDF anything can read.
        return detected_kind == PDF_KIND and source.extension == ".pdf" and b"obj" in source.content

    def parse(self, source: DocumentSource) -> ParsedDocument:
        try:
            return self._parse(source.content)
        except (InvalidDocumentError, MemoryError):
            raise
        except Exception as exc:  # MuPDF failed mid-document (a cycle in the page tree, ...)
            return parse_with_pypdf(source.content, self.limits, f"{exc.__class__.__name__}: {exc}")

    def _parse(self, content: bytes) -> ParsedDocument:
        doc, error, repaired = _open(content)
        if doc is None:
            return parse_with_pypdf(content, self.limits, error)
        gate = AssetGate(self.limits)
        ocr: dict[int, tuple[list[Block], ParsedAsset | None, str]] = {}
        try:
            ocr_empty: list[int] = []  # pages OCR read and found no text on
            pages = self._pages(doc, gate, ocr, ocr_empty)
            metadata = {k: v for k, v in (doc.metadata or {}).items() if v and k in ("title", "author", "subject")}
            metadata["page_count"] = doc.page_count
            metadata["properties"] = pdf_properties(doc.metadata or {})
        finally:
            doc.close()
        pages, unreadable, partly = _readable(pages)
        blocks: list[Block] = []
        assets: list[ParsedAsset] = []
        for number, items in enumerate(mark_headings(pages), start=1):
            if number in ocr:
                ocr_page_blocks, page_asset, _ = ocr[number]
                blocks.extend(ocr_page_blocks)
                assets.extend([page_asset] if page_asset is not None else [])
                continue
            for item in items:
                locator = SourceLocator(page=number)
                if item.asset is not None:
                    assets.append(item.asset)
                    blocks.append(Block(kind="figure", text=figure_text(item.asset), locator=locator,
                                        asset_ids=(item.asset.locator_key,)))
                elif item.heading:
                    blocks.append(Block(kind="heading", text=item.text, locator=locator, level=min(item.heading, 6)))
                else:
                    blocks.append(Block(kind="paragraph", text=item.text, locator=locator))
        if not any(b.text.strip() for b in blocks if b.kind != "figure"):
            if unreadable:
                raise InvalidDocumentError(UNREADABLE_REASON)
            if not assets:
                raise InvalidDocumentError(
                    f"the PDF has no text to index: OCR found no text on {_pages_text(ocr_empty)} (blank pages?)"
                    if ocr_empty else "the PDF has no text to index: its pages are blank (no text layer, no image)")
        warnings = [*repaired, *unreadable_warnings(unreadable, partly, metadata["page_count"])]
        if ocr_empty:
            warnings.append(f"{_pages_text(ocr_empty)} of {metadata['page_count']}: OCR found no text (blank pages?)")
        if ocr:
            metadata["ocr_pages"] = len(ocr)
            warnings += ocr_warnings({n: why for n, (_, _, why) in ocr.items()}, metadata["page_count"])
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, [*gate.warnings, *warnings]),
                              assets=tuple(assets))

    def _pages(self, doc: pymupdf.Document, gate: AssetGate,
               ocr: dict[int, tuple[list[Block], ParsedAsset | None, str]], ocr_empty: list[int]) -> list[list[_Item]]:
        """The text and image items of each page; pages read by OCR go into ``ocr`` instead (and
        are empty in the list). Progress: pages done / total."""
        if doc.page_count > self.limits.max_pages:
            raise InvalidDocumentError(
                f"the PDF has {doc.page_count} pages, more than the limit of {self.limits.max_pages}")
        pages: list[list[_Item]] = []
        for index in range(doc.page_count):
            page = doc[index]
            items = text_items(page)
            progress.report(index, doc.page_count)
            why = needs_ocr(page, [it.text for it in items], self.limits.ocr)
            if why:
                read = ocr_page(page, index + 1, gate, self.limits)
                if read is not None:
                    ocr[index + 1] = (*read, why)
                    pages.append([])
                    continue
                if why != "unreadable":  # an unreadable text layer has its own warning
                    ocr_empty.append(index + 1)
            # per image and per document asset limits: assets.AssetGate (warns, or fails the document)
            images = [_Item(*rect, asset=asset) for rect, asset in page_images(doc, page, index + 1, gate)]
            for image in images:
                _attach_caption(image, items)
            pages.append(reading_order(items + images, page.rect.width))
        progress.report(doc.page_count, doc.page_count)
        return pages


def _open(content: bytes) -> tuple[pymupdf.Document | None, str, list[str]]:
    """The document MuPDF opens (with its page tree rebuilt when it finds no pages but page objects
    exist) and warnings about the repair; or (None, what went wrong, []) when it cannot."""
    try:
        doc = pymupdf.open(stream=content, filetype="pdf")
    except Exception as exc:
        return None, f"{exc.__class__.__name__}: {exc}", []
    if doc.needs_pass and not doc.authenticate(""):
        doc.close()
        raise InvalidDocumentError(ENCRYPTED)
    if doc.page_count == 0:
        rebuilt = rebuild_page_tree(doc)
        doc.close()
        if rebuilt is None:
            return None, "no pages", []
        return rebuilt, "", [PAGE_TREE_WARNING]
    return doc, "", []


def _readable(pages: list[list[_Item]]) -> tuple[list[list[_Item]], list[int], list[int]]:
    """Pages without the text that cannot be read (text_quality.py): an unreadable page keeps only
    its images; a readable one loses its unreadable blocks. Also returns the page numbers of both."""
    out: list[list[_Item]] = []
    unreadable: list[int] = []
    partly: list[int] = []
    for number, items in enumerate(pages, start=1):
        texts = [it.text for it in items if it.asset is None]
        if page_is_unreadable(texts):
            unreadable.append(number)
            out.append([it for it in items if it.asset is not None])
            continue
        kept = [it for it in items if it.asset is not None or not is_unreadable(it.text)]
        if len(kept) < len(items):
            partly.append(number)
        out.append(kept)
    return out, unreadable, partly


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


def _pages_text(numbers: list[int]) -> str:
    return f"{'page' if len(numbers) == 1 else 'pages'} {page_ranges(numbers)}"

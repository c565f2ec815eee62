"""PDF parser: text per page in a column-aware reading order, headings from font sizes
(pdf_text.py), tables as rows under their header (pdf_tables.py), page furniture — running
headers and footers, page numbers, table-of-contents lines — out of the body (pdf_furniture.py),
and embedded images as assets with their original bytes, page and position.

The file is read by an engine (pdf_engine.py): PDFium (pypdfium2, the default) or PyMuPDF (the
optional AGPL extra, ``ULTIMATE_RAG_PDF_ENGINE=pymupdf``). Pages without a text layer (scans) and
pages whose text layer cannot be read are read by OCR (pdf_ocr.py; or left out, text_quality.py,
when OCR is off); a file no engine can open is read by pypdf instead (pdf_fallback.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator, figure_text

from . import progress
from .assets import AssetGate, with_warnings
from .limits import ParseLimits
from .pdf_engine import CannotOpen, OpenedPdf, check_engine, open_pdf
from .pdf_fallback import parse_with_pypdf
from .pdf_furniture import strip_furniture
from .pdf_lines import Line, Rule, build_lines
from .pdf_ocr import PdfOcr, needs_ocr
from .pdf_tables import find_tables, join_continued, table_block
from .pdf_text import Item, mark_headings, text_items
from .properties import pdf_properties
from .text_quality import UNREADABLE_REASON, is_unreadable, page_is_unreadable, page_ranges, unreadable_warnings

log = logging.getLogger(__name__)

PDF_KIND = "binary:application/pdf"
# A caption or figure label next to an image: "Figure 3", "Fig. 2:", "图 1", "圖1", "그림 2".
CAPTION = re.compile(r"^\s*(figure|fig\.|image|photo|chart|diagram|图|圖|그림)\s*\d*", re.IGNORECASE)


@dataclass
class _Page:
    width: float = 0.0
    height: float = 0.0
    lines: list[Line] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    images: list[Item] = field(default_factory=list)


class PdfParser:
    extensions = (".pdf",)
    name = "pdf"
    version = "2.0.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()
        self.engine = check_engine(self.limits.pdf_engine)

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        # The extension must agree with the content (a PDF named .md is refused, not guessed at);
        # bytes that start like a PDF but hold no object at all are not a PDF anything can read.
        return detected_kind == PDF_KIND and source.extension == ".pdf" and b"obj" in source.content

    def parse(self, source: DocumentSource) -> ParsedDocument:
        try:
            return self._parse(source.content)
        except (InvalidDocumentError, MemoryError):
            raise
        except Exception as exc:  # the engine failed mid-document (a cycle in the page tree, ...)
            log.warning("PDF engine %s failed: %s: %s", self.engine, exc.__class__.__name__, exc)
            return parse_with_pypdf(source.content, self.limits, f"{exc.__class__.__name__}: {exc}")

    def _parse(self, content: bytes) -> ParsedDocument:
        try:
            pdf, repaired = open_pdf(self.engine, content)
        except CannotOpen as exc:
            return parse_with_pypdf(content, self.limits, str(exc))
        gate = AssetGate(self.limits)
        ocr = PdfOcr(gate, self.limits)
        ocr_empty: list[int] = []  # pages OCR read and found no text on
        try:
            pages = self._pages(pdf, gate, ocr, ocr_empty)
            metadata: dict[str, object] = {**pdf.metadata, "page_count": pdf.page_count, "pdf_engine": pdf.engine,
                                           "properties": pdf_properties(pdf.metadata)}
        finally:
            pdf.close()
        kept, furniture = strip_furniture([page.lines for page in pages], [(page.width, page.height) for page in pages])
        metadata.update(furniture)
        items, unreadable, partly = _layout(pages, kept)
        blocks: list[Block] = []
        assets: list[ParsedAsset] = []
        for number, page_items in enumerate(mark_headings(join_continued(items)), start=1):
            if number in ocr.pages:
                ocr_blocks, ocr_assets, _ = ocr.pages[number]
                blocks.extend(ocr_blocks)
                assets.extend(ocr_assets)
                continue
            blocks.extend(_blocks(number, page_items, assets, sum(b.kind == "table" for b in blocks)))
        if not any(b.text.strip() for b in blocks if b.kind != "figure"):
            if unreadable:
                raise InvalidDocumentError(UNREADABLE_REASON)
            if not assets:
                raise InvalidDocumentError(
                    f"the PDF has no text to index: OCR found no text on {_pages_text(ocr_empty)} (blank pages?)"
                    if ocr_empty else "the PDF has no text to index: its pages are blank (no text layer, no image)")
        page_count = pdf.page_count
        warnings = [*repaired, *unreadable_warnings(unreadable, partly, page_count)]
        if ocr_empty:
            warnings.append(f"{_pages_text(ocr_empty)} of {page_count}: OCR found no text (blank pages?)")
        if ocr.pages:
            metadata["ocr_pages"] = len(ocr.pages)
        warnings += ocr.warnings(page_count)
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, [*gate.warnings, *warnings]),
                              assets=tuple(assets))

    def _pages(self, pdf: OpenedPdf, gate: AssetGate, ocr: PdfOcr, ocr_empty: list[int]) -> list[_Page]:
        """Lines, rules and images of each page; pages read by OCR are empty here, their blocks are
        in ``ocr.pages``. Progress: pages done / total."""
        if pdf.page_count > self.limits.max_pages:
            raise InvalidDocumentError(
                f"the PDF has {pdf.page_count} pages, more than the limit of {self.limits.max_pages}")
        ocr.check_page_count(pdf)
        pages: list[_Page] = []
        for index in range(pdf.page_count):
            width, height = pdf.size(index)
            page = _Page(width=width, height=height)
            glyphs = pdf.glyphs(index)
            page.rules = pdf.rules(index) if glyphs else []
            page.lines = build_lines(glyphs, page.rules)
            del glyphs
            progress.report(index, pdf.page_count)
            why = needs_ocr(pdf, index, [line.text for line in page.lines], self.limits.ocr)
            if why and ocr.read(pdf, index, why):
                page.lines, page.rules = [], []
            else:
                if why and why != "unreadable" and index + 1 not in ocr.foreign:  # those have their own warnings
                    ocr_empty.append(index + 1)
                # per image and per document asset limits: assets.AssetGate (warns, or fails the document)
                page.images = [Item(*rect, asset=asset) for rect, asset in pdf.images(index, gate)]
            pages.append(page)
        progress.report(pdf.page_count, pdf.page_count)
        return pages


def _layout(pages: list[_Page], kept: list[list[Line]]) -> tuple[list[list[Item]], list[int], list[int]]:
    """Each page's items in reading order: tables, text blocks and images; without the text that
    cannot be read (text_quality.py: an unreadable page keeps only its images, a readable one
    loses its unreadable blocks). Also the numbers of both kinds of page."""
    out: list[list[Item]] = []
    unreadable: list[int] = []
    partly: list[int] = []
    for number, (page, lines) in enumerate(zip(pages, kept, strict=True), start=1):
        if page_is_unreadable([line.text for line in lines]):
            unreadable.append(number)
            out.append(list(page.images))
            continue
        tables, rest = find_tables(lines, page.rules, number, page.width)
        texts = text_items(rest)
        readable = [it for it in texts if not is_unreadable(it.text)]
        if len(readable) < len(texts):
            partly.append(number)
        for image in page.images:
            _attach_caption(image, readable)
        out.append(reading_order(readable + tables + page.images, page.width))
    return out, unreadable, partly


def _blocks(number: int, items: list[Item], assets: list[ParsedAsset], tables_before: int) -> list[Block]:
    blocks: list[Block] = []
    locator = SourceLocator(page=number)
    for item in items:
        if item.asset is not None:
            assets.append(item.asset)
            blocks.append(Block(kind="figure", text=figure_text(item.asset), locator=locator,
                                asset_ids=(item.asset.locator_key,)))
        elif item.table is not None:
            blocks.extend(table_block(item.table, tables_before + sum(b.kind == "table" for b in blocks) + 1))
        elif item.heading:
            blocks.append(Block(kind="heading", text=item.text, locator=locator, level=min(item.heading, 6)))
        elif item.text:
            blocks.append(Block(kind="paragraph", text=item.text, locator=locator))
    return blocks


def _attach_caption(image: Item, items: list[Item]) -> None:
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


def reading_order(items: list[Item], page_width: float) -> list[Item]:
    """Column-aware order: the page's columns are the stretches its narrow items cover (merged
    where they overlap); an item that reaches over two columns (a title, a wide figure or table)
    divides the page into bands, and inside a band the columns are read in turn, left to right,
    each top to bottom. One, two or three columns alike."""
    if not items:
        return []
    columns = _columns([it for it in items if it.x1 - it.x0 <= THIRD * page_width])
    if len(columns) < 3:  # not three columns: two, or one
        columns = _columns([it for it in items if it.x1 - it.x0 <= NARROW * page_width])
    ordered: list[Item] = []
    band: list[Item] = []

    def flush() -> None:
        band.sort(key=lambda it: (_column_of(it, columns), it.y0, it.x0))
        ordered.extend(band)
        band.clear()

    for item in sorted(items, key=lambda it: (round(it.y0, 1), it.x0)):
        if sum(1 for a, b in columns if min(item.x1, b) - max(item.x0, a) > 0.1 * (b - a)) >= 2:
            flush()
            ordered.append(item)
        else:
            band.append(item)
    flush()
    return ordered


NARROW = 0.6  # share of the page width: a narrower item belongs to one column (of two)
THIRD = 0.4  # the same for a page of three columns


def _columns(items: list[Item]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for item in sorted(items, key=lambda it: it.x0):
        if out and item.x0 <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], item.x1))
        else:
            out.append((item.x0, item.x1))
    return out


def _column_of(item: Item, columns: list[tuple[float, float]]) -> int:
    centre = (item.x0 + item.x1) / 2
    return next((k for k, (a, b) in enumerate(columns) if a <= centre <= b), len(columns))


def _pages_text(numbers: list[int]) -> str:
    return f"{'page' if len(numbers) == 1 else 'pages'} {page_ranges(numbers)}"

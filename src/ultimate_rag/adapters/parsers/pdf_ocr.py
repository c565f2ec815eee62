"""OCR of PDF pages (``ocr.py``, ``ocr_layout.py``): which pages need it, how many a document may
have, and their text as blocks.

With ``ULTIMATE_RAG_OCR=auto`` (the default) a page is read by OCR when its text layer is
unreadable (``text_quality.py``: fonts without a Unicode map) or when it has no text but shows an
image (a scan); ``force`` reads every page by OCR, ``off`` none. A document with more such pages
than ``max_ocr_pages`` is refused before any page is read. The page is rendered (200 dpi, at most
``ocr_max_pixels``), the rendering becomes the page's asset (its embedded images are not kept
separately: the rendering shows them; figures the layout model finds are cropped from it), and
every OCR block cites its page and box in PDF points. A page on which OCR reads nothing is kept as
it was (its images; for an unreadable text layer, the warning that it was left out).
"""

from __future__ import annotations

import io
from dataclasses import replace

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, ParsedAsset, SourceLocator

from .assets import AssetGate
from .limits import ParseLimits
from .ocr import AUTO, FORCE, foreign_script_warning
from .ocr_layout import admitted, read_page
from .pdf_engine import OpenedPdf, render_page
from .text_quality import page_is_unreadable, page_ranges

OCR_DPI = 200
_SAID = {"unreadable": "the text layer cannot be read (its fonts have no Unicode map); their text was read by OCR",
         "scan": "no text layer (scanned images); their text was read by OCR",
         "forced": "text read by OCR (ULTIMATE_RAG_OCR=force)"}


def needs_ocr(pdf: OpenedPdf, index: int, texts: list[str], mode: str) -> str:
    """Why the page is read by OCR ("unreadable", "scan", "forced"), or "" when it is not."""
    if mode == FORCE:
        return "forced"
    if mode != AUTO:
        return ""
    if page_is_unreadable(texts):
        return "unreadable"
    return "scan" if not any(text.strip() for text in texts) and pdf.has_images(index) else ""


class PdfOcr:
    """The pages of one PDF read by OCR: their blocks and assets by page number, and what the
    document says about them."""

    def __init__(self, gate: AssetGate, limits: ParseLimits) -> None:
        self.gate, self.limits = gate, limits
        self.pages: dict[int, tuple[list[Block], list[ParsedAsset], str]] = {}
        self.foreign: list[int] = []

    def check_page_count(self, pdf: OpenedPdf) -> None:
        """Refuse, before any OCR, a document with more pages to read by OCR than the limit (a
        small file can declare thousands of pages that all show one scan)."""
        limit = self.limits.max_ocr_pages
        if self.limits.ocr not in (AUTO, FORCE) or pdf.page_count <= limit:
            return
        count = pdf.page_count if self.limits.ocr == FORCE else sum(
            1 for index in range(pdf.page_count) if not pdf.has_text(index) and pdf.has_images(index))
        if count > limit:
            raise InvalidDocumentError(
                f"the PDF has {count} pages to read by OCR (of {pdf.page_count}), more than the limit of {limit} "
                "(ULTIMATE_RAG_PARSE_MAX_OCR_PAGES)")

    def read(self, pdf: OpenedPdf, index: int, why: str) -> bool:
        """OCR the page; True when it read text (its blocks are then ``self.pages[number]``): a
        figure block for the rendered page (an asset, so citations can show it; the vision step may
        describe it), then the page's blocks in reading order."""
        number = index + 1
        image, scale = render_page(pdf, index, dpi=OCR_DPI, max_pixels=self.limits.ocr_max_pixels)
        key = f"page-{number}/scan"
        result = read_page(image, number, scale=scale, asset_key=key)
        if result.foreign_script:
            self.foreign.append(number)
        blocks, crops = admitted(result, self.gate)
        if not blocks:
            return False
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=80, optimize=True)
        asset = self.gate.admit(ParsedAsset(locator_key=key, data=buffer.getvalue(), mime_type="image/jpeg",
                                            page=number), f"the image of page {number}")
        if asset is None:
            blocks = [replace(b, asset_ids=tuple(k for k in b.asset_ids if k != key)) for b in blocks]
            self.pages[number] = (blocks, crops, why)
            return True
        figure = Block(kind="figure", text=f"[Image on page {number}]", locator=SourceLocator(page=number),
                       asset_ids=(key,))
        self.pages[number] = ([figure, *blocks], [asset, *crops], why)
        return True

    def warnings(self, page_count: int) -> list[str]:
        """Which pages were read by OCR and why; which held text in a script OCR cannot read."""
        out = []
        for reason, text in _SAID.items():
            pages = [n for n, (_, _, r) in self.pages.items() if r == reason]
            if pages:
                out.append(f"{_pages(pages)} {page_ranges(pages)} of {page_count}: {text}")
        if self.foreign:
            out.append(foreign_script_warning(f"{_pages(self.foreign)} {page_ranges(self.foreign)} of {page_count}"))
        return out


def _pages(numbers: list[int]) -> str:
    return "page" if len(numbers) == 1 else "pages"

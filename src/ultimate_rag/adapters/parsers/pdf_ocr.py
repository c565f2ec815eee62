"""OCR of PDF pages (``ocr.py``): which pages need it, and their text as blocks.

With ``ULTIMATE_RAG_OCR=auto`` (the default) a page is read by OCR when its text layer is
unreadable (``text_quality.py``: fonts without a Unicode map) or when it has no text but shows an
image (a scan); ``force`` reads every page by OCR, ``off`` none. The page is rendered (200 dpi,
at most ``ocr_max_pixels``), the rendering becomes the page's one asset (its embedded images are
not kept separately: the rendering shows them), and every OCR paragraph cites its page and box in
PDF points. A page on which OCR reads nothing is kept as it was (its images; for an unreadable
text layer, the warning that it was left out).
"""

from __future__ import annotations

import io
from dataclasses import replace

from ultimate_rag.domain.models import Block, ParsedAsset, SourceLocator

from .assets import AssetGate
from .limits import ParseLimits
from .ocr import AUTO, FORCE, ocr_blocks
from .pdf_engine import OpenedPdf, render_page
from .text_quality import page_is_unreadable, page_ranges

OCR_DPI = 200


def needs_ocr(pdf: OpenedPdf, index: int, texts: list[str], mode: str) -> str:
    """Why the page is read by OCR ("unreadable", "scan", "forced"), or "" when it is not."""
    if mode == FORCE:
        return "forced"
    if mode != AUTO:
        return ""
    if page_is_unreadable(texts):
        return "unreadable"
    return "scan" if not any(text.strip() for text in texts) and pdf.has_images(index) else ""


def ocr_warnings(reasons: dict[int, str], page_count: int) -> list[str]:
    """What the document says about its pages read by OCR (the text may hold recognition errors)."""
    said = {"unreadable": "the text layer cannot be read (its fonts have no Unicode map); their text was read by OCR",
            "scan": "no text layer (scanned images); their text was read by OCR",
            "forced": "text read by OCR (ULTIMATE_RAG_OCR=force)"}
    warnings = []
    for reason, text in said.items():
        pages = [n for n, r in reasons.items() if r == reason]
        if pages:
            which = "page" if len(pages) == 1 else "pages"
            warnings.append(f"{which} {page_ranges(pages)} of {page_count}: {text}")
    return warnings


def ocr_page(pdf: OpenedPdf, index: int, gate: AssetGate,
             limits: ParseLimits) -> tuple[list[Block], ParsedAsset | None] | None:
    """A figure block for the rendered page (an asset, so citations can show it; the vision step
    may describe it) followed by the paragraphs OCR reads on it; None when OCR reads nothing (the
    page is then read as it would be without OCR)."""
    number = index + 1
    image, scale = render_page(pdf, index, dpi=OCR_DPI, max_pixels=limits.ocr_max_pixels)
    key = f"page-{number}/scan"
    blocks = ocr_blocks(image, number, scale=scale, asset_key=key)
    if not blocks:
        return None
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=80, optimize=True)
    asset = gate.admit(ParsedAsset(locator_key=key, data=buffer.getvalue(), mime_type="image/jpeg", page=number),
                       f"the image of page {number}")
    if asset is None:
        return [replace(block, asset_ids=()) for block in blocks], None
    figure = Block(kind="figure", text=f"[Image on page {number}]", locator=SourceLocator(page=number),
                   asset_ids=(key,))
    return [figure, *blocks], asset

"""Limits that keep hostile documents from exhausting a parser (settings: ``ULTIMATE_RAG_PARSE_*``).

Limits on one image (pixels, bytes) never fail a document: the image is downscaled or left out
with a warning on the document (``assets.py``). Limits on the whole document do fail it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ParseLimits:
    max_pages: int = 5000  # PDF pages
    max_image_pixels: int = 100_000_000  # one image, width × height: larger ones are downscaled
    max_image_bytes: int = 32 * 1024 * 1024  # one image as stored: larger ones are downscaled or left out
    min_image_side: int = 16  # smaller PDF images (icons, spacers) are not kept as assets
    max_asset_bytes: int = 256 * 1024 * 1024  # all images of one document together (fails the document)
    max_assets: int = 2000  # images of one document (fails the document)
    max_archive_bytes: int = 512 * 1024 * 1024  # DOCX: uncompressed size of all entries together
    max_archive_entries: int = 10_000  # DOCX: entries in the zip
    max_html_depth: int = 200  # HTML element nesting
    max_text_chars: int = 20_000_000  # characters of text after parsing, any format
    max_csv_field_chars: int = 1_000_000  # one CSV cell
    max_sheets: int = 200  # XLSX/ODS: sheets in one workbook (fails the document)
    max_cells: int = 5_000_000  # XLSX/ODS: non-empty cells read in all sheets together (fails the document)
    ocr: str = "auto"  # "off" | "auto" (pages without readable text, images) | "force" (every page)
    ocr_max_pixels: int = 12_000_000  # a page or image is scaled down to this many pixels before OCR
    max_ocr_pages: int = 500  # pages of one document to read by OCR (PDF pages, TIFF pages): checked before OCR
    pdf_engine: str = "pdfium"  # "pdfium" (pypdfium2, the default) | "pymupdf" (the optional AGPL extra)
    pdf_layout: bool = True  # the layout model on born-digital pages whose text layer lacks structure (pdf_layout.py)

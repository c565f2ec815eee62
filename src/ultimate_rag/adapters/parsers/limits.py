"""Limits that keep hostile documents from exhausting a parser (settings: ``ULTIMATE_RAG_PARSE_*``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ParseLimits:
    max_pages: int = 5000  # PDF pages
    max_image_pixels: int = 100_000_000  # one embedded image, width × height
    min_image_side: int = 16  # smaller images (icons, spacers) are not kept as assets
    max_asset_bytes: int = 512 * 1024 * 1024  # all images of one document together
    max_archive_bytes: int = 512 * 1024 * 1024  # DOCX: uncompressed size of all entries together
    max_archive_entries: int = 10_000  # DOCX: entries in the zip
    max_html_depth: int = 200  # HTML element nesting
    max_text_chars: int = 20_000_000  # characters of text after parsing, any format
    max_csv_field_chars: int = 1_000_000  # one CSV cell

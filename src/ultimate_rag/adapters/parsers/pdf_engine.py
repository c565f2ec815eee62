"""The PDF engines behind one shape, and which one a deployment runs.

``pdfium`` (the default, pypdfium2: PDFium is Apache-2.0 / BSD-3-Clause) or ``pymupdf`` (the
optional extra ``ultimate-rag[pymupdf]``, AGPL-3.0; ``ULTIMATE_RAG_PDF_ENGINE=pymupdf``). Either
gives the parser the same things per page (``OpenedPdf``): glyphs with boxes and sizes, ruling
lines, images as assets, a rendering. Everything else (lines, layout, furniture, tables,
headings, OCR decisions) is shared, so the engines differ only where the libraries do.

A file the engine cannot open, or in which it finds no page, has its page tree rebuilt from its
page objects by pypdf (``pdf_fallback.rebuild_page_tree``), or, cut short, its complete objects
copied into a new file (``salvage_objects``), and is opened again; when that fails too, pypdf reads
its text alone (``pdf_fallback.parse_with_pypdf``).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from PIL import Image

from ultimate_rag.domain.models import ParsedAsset

from .assets import AssetGate
from .pdf_fallback import ENCRYPTED, PAGE_TREE_WARNING, SALVAGED_WARNING, rebuild_page_tree, salvage_objects
from .pdf_lines import Glyph, Rule

__all__ = ["ENCRYPTED", "CannotOpen", "Matrix", "OpenedPdf", "check_engine", "open_pdf", "render_page"]

ENGINES = ("pdfium", "pymupdf")
DEFAULT_ENGINE = "pdfium"
Rect = tuple[float, float, float, float]


class CannotOpen(Exception):
    """The engine cannot open the file (damaged); the message is for the log, not the user."""


class OpenedPdf(Protocol):
    engine: str
    page_count: int

    @property
    def metadata(self) -> dict[str, str]: ...

    def size(self, index: int) -> tuple[float, float]: ...

    def glyphs(self, index: int) -> list[Glyph]: ...

    def has_text(self, index: int) -> bool: ...

    def rules(self, index: int) -> list[Rule]: ...

    def has_images(self, index: int) -> bool: ...

    def images(self, index: int, gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]: ...

    def render(self, index: int, zoom: float) -> Image.Image: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Matrix:
    """A PDF transformation matrix (row vectors: ``p' = p × M``)."""

    a: float = 1.0
    b: float = 0.0
    c: float = 0.0
    d: float = 1.0
    e: float = 0.0
    f: float = 0.0

    def multiply(self, other: Matrix) -> Matrix:
        """``self × other``: first this transformation, then ``other``."""
        return Matrix(self.a * other.a + self.b * other.c, self.a * other.b + self.b * other.d,
                      self.c * other.a + self.d * other.c, self.c * other.b + self.d * other.d,
                      self.e * other.a + self.f * other.c + other.e, self.e * other.b + self.f * other.d + other.f)

    def apply(self, x: float, y: float) -> tuple[float, float]:
        return x * self.a + y * self.c + self.e, x * self.b + y * self.d + self.f

    def bounds(self, box: Sequence[float]) -> Rect:
        """The box (left, bottom, right, top) around a transformed box."""
        corners = [self.apply(box[0], box[1]), self.apply(box[2], box[1]),
                   self.apply(box[0], box[3]), self.apply(box[2], box[3])]
        xs, ys = [p[0] for p in corners], [p[1] for p in corners]
        return min(xs), min(ys), max(xs), max(ys)


def check_engine(engine: str) -> str:
    """The engine name, or ValueError with what to do when it is unknown or not installed."""
    if engine not in ENGINES:
        raise ValueError(f"unknown PDF engine {engine!r}: 'pdfium' (default) or 'pymupdf'")
    if engine == "pymupdf" and importlib.util.find_spec("pymupdf") is None:
        raise ValueError("ULTIMATE_RAG_PDF_ENGINE=pymupdf needs PyMuPDF (AGPL-3.0), which is not installed: "
                         "pip install 'ultimate-rag[pymupdf]'")
    return engine


def open_with(engine: str, content: bytes) -> OpenedPdf:
    """Open ``content`` with one engine: CannotOpen when it cannot, InvalidDocumentError when the
    file needs a password."""
    if engine == "pymupdf":
        from .pdf_mupdf import MupdfPdf

        return MupdfPdf(content)
    from .pdf_pdfium import PdfiumPdf

    return PdfiumPdf(content)


def open_pdf(engine: str, content: bytes) -> tuple[OpenedPdf, list[str]]:
    """The file opened by ``engine`` (its page tree rebuilt when the engine cannot open it or finds
    no page in it) and warnings about the repair; CannotOpen when nothing helps."""
    try:
        pdf = open_with(engine, content)
        if pdf.page_count > 0:
            return pdf, []
        pdf.close()
        problem = "no pages"
    except CannotOpen as exc:
        problem = str(exc)
    for repair, warning in ((rebuild_page_tree, PAGE_TREE_WARNING), (salvage_objects, SALVAGED_WARNING)):
        repaired = repair(content)
        if repaired is None:
            continue
        try:
            pdf = open_with(engine, repaired)
        except CannotOpen:
            continue
        if pdf.page_count > 0:
            return pdf, [warning]
        pdf.close()
    raise CannotOpen(problem)


def render_page(pdf: OpenedPdf, index: int, *, dpi: float, max_pixels: int) -> tuple[Image.Image, float]:
    """Page ``index`` (0-based) as an RGB image at ``dpi`` (less when that would exceed
    ``max_pixels``) and its scale in pixels per PDF point. The one rendering function for OCR and
    layout analysis, whichever engine opened the file."""
    width, height = pdf.size(index)
    zoom = dpi / 72
    area = max(width * height, 1.0)
    if area * zoom * zoom > max_pixels:
        zoom = math.sqrt(max_pixels / area)
        while math.ceil(width * zoom) * math.ceil(height * zoom) > max_pixels:
            zoom *= 0.995  # the renderer rounds each side up
    return pdf.render(index, zoom), zoom

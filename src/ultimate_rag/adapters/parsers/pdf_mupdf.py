"""The optional PDF engine: PyMuPDF (MuPDF), AGPL-3.0, installed with ``ultimate-rag[pymupdf]``
and chosen with ``ULTIMATE_RAG_PDF_ENGINE=pymupdf`` (docs/formats.md says what its licence
means for a deployment). The same ``OpenedPdf`` shape as ``pdf_pdfium.py``: glyphs from MuPDF's
``rawdict``, ruling lines from ``get_drawings``, images (``pdf_mupdf_images.py``), renderings.
Only this module and ``pdf_mupdf_images.py`` import ``pymupdf``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymupdf
from PIL import Image

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import ParsedAsset

from .assets import AssetGate
from .pdf_engine import ENCRYPTED, CannotOpen, Rect
from .pdf_lines import NEWLINE, SPACE, Glyph, Rule
from .pdf_mupdf_images import page_images

_MAX_DRAWINGS = 4000
_RULE_WIDTH = 3.0


class MupdfPdf:
    engine = "pymupdf"

    def __init__(self, content: bytes) -> None:
        try:
            self._doc = pymupdf.open(stream=content, filetype="pdf")
        except Exception as exc:
            raise CannotOpen(f"{exc.__class__.__name__}: {exc}") from exc
        if self._doc.needs_pass and not self._doc.authenticate(""):
            self._doc.close()
            raise InvalidDocumentError(ENCRYPTED)
        self.page_count = int(self._doc.page_count)

    @property
    def metadata(self) -> dict[str, str]:
        found = self._doc.metadata or {}
        return {_PROPERTIES[k]: str(v) for k, v in found.items() if v and k in _PROPERTIES}

    def close(self) -> None:
        self._doc.close()

    def size(self, index: int) -> tuple[float, float]:
        rect = self._doc[index].rect
        return float(rect.width), float(rect.height)

    def has_text(self, index: int) -> bool:
        return bool(self._doc[index].get_text("text").strip())

    def glyphs(self, index: int) -> list[Glyph]:
        page = self._doc[index]
        try:
            data = page.get_text("rawdict", flags=pymupdf.TEXTFLAGS_TEXT)
        except Exception as exc:
            raise InvalidDocumentError(f"page {index + 1} of the PDF is damaged and cannot be read") from exc
        out: list[Glyph] = []
        for block in data.get("blocks", ()):
            if block.get("type") != 0:
                continue
            for line in block.get("lines", ()):
                brk = NEWLINE
                for span in line.get("spans", ()):
                    size = float(span.get("size", 0.0))
                    bold = bool(span.get("flags", 0) & 16)
                    for char in span.get("chars", ()):
                        text = char.get("c", "")
                        if not text or text.isspace():
                            brk = brk or SPACE
                            continue
                        x0, y0, x1, y1 = char["bbox"]
                        out.append((text, x0, y0, x1, y1, size, bold, brk))
                        brk = 0
        return out

    def rules(self, index: int) -> list[Rule]:
        page = self._doc[index]
        try:
            drawings = page.get_drawings()
        except Exception:
            return []
        if len(drawings) > _MAX_DRAWINGS:
            return []
        rules: list[Rule] = []
        for drawing in drawings:
            for item in drawing.get("items", ()):
                rules.extend(_item_rules(item))
        return [r for r in rules if min(r[2] - r[0], r[3] - r[1]) <= _RULE_WIDTH]

    def has_images(self, index: int) -> bool:
        return bool(self._doc[index].get_image_info())

    def images(self, index: int, gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]:
        return page_images(self._doc, self._doc[index], index + 1, gate)

    def render(self, index: int, zoom: float) -> Image.Image:
        pixmap = self._doc[index].get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), colorspace=pymupdf.csRGB, alpha=False)
        return Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)


def _item_rules(item: Any) -> Iterator[Rule]:
    kind = item[0]
    if kind == "l":
        a, b = item[1], item[2]
        if abs(a.x - b.x) <= 0.5 or abs(a.y - b.y) <= 0.5:
            yield min(a.x, b.x), min(a.y, b.y), max(a.x, b.x), max(a.y, b.y)
    elif kind == "re":
        r = item[1]
        if min(r.width, r.height) <= _RULE_WIDTH:
            yield r.x0, r.y0, r.x1, r.y1
        else:
            yield from ((r.x0, r.y0, r.x1, r.y0), (r.x0, r.y1, r.x1, r.y1),
                        (r.x0, r.y0, r.x0, r.y1), (r.x1, r.y0, r.x1, r.y1))


# the information dictionary's entries a parse keeps, as every engine names them (properties.py)
_PROPERTIES = {"title": "title", "author": "author", "subject": "subject", "creationDate": "creation_date",
               "modDate": "mod_date"}

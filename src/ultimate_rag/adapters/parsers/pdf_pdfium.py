"""The default PDF engine: PDFium through pypdfium2 (Apache-2.0 / BSD-3-Clause).

What the parser needs from a PDF, read with PDFium: the glyphs of a page with their boxes and
font sizes (``FPDFText_*``: one call per glyph for its code, size, line box and ink box — the
line box's width is the font's advance, which some fonts (CJK fonts' Latin digits) declare a
full em wide, so the sides come from the ink; bold and size, times the text matrix's scale,
where a word starts), the ruling lines drawn on it (path objects, for tables), its images (image objects,
inline ones included, also inside form XObjects) and the page rendered for OCR. Coordinates are
PDF points with the origin at the top left of the crop box.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterator
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as raw
from PIL import Image

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import ParsedAsset

from .assets import AssetGate
from .pdf_engine import ENCRYPTED, CannotOpen, Matrix, Rect
from .pdf_images import page_images
from .pdf_lines import INFERRED, NEWLINE, SPACE, Glyph, Rule

_BOLD_WEIGHT = 600
# whitespace is a break between glyphs, not a glyph; control characters stay glyphs (an unmapped
# font's codes come out as controls, and text_quality.py needs to see them)
_SPACES = frozenset({9, 32, 0xA0, 0x2002, 0x2003, 0x2009, 0x200B, 0x3000, 0xFEFF, 0xFFFE})
_MAX_FORM_DEPTH = 8
_MAX_PATHS = 4000  # a page drawn with more path objects than this (a chart, a map) gives no rules
_MAX_FILLED_SEGMENTS = 64  # a filled (not stroked) path with more segments is a shape, not thin bars
_RULE_WIDTH = 3.0  # points: a filled rectangle thinner than this is a ruling line


class PdfiumPdf:
    """An open PDF (``pdf_engine.OpenedPdf``)."""

    engine = "pdfium"

    def __init__(self, content: bytes) -> None:
        try:
            self._doc = pdfium.PdfDocument(content)
        except pdfium.PdfiumError as exc:
            if getattr(exc, "err_code", None) == raw.FPDF_ERR_PASSWORD:
                raise InvalidDocumentError(ENCRYPTED) from exc
            raise CannotOpen(str(exc)) from exc
        self.page_count = len(self._doc)
        self._page_index = -1
        self._page: Any = None
        self._text: Any = None
        self._walked: tuple[int, list[tuple[Any, Matrix]], list[tuple[Any, Matrix]]] | None = None

    @property
    def metadata(self) -> dict[str, str]:
        try:
            found = self._doc.get_metadata_dict(skip_empty=True)
        except Exception:
            return {}
        return {_PROPERTIES[key]: str(value) for key, value in found.items() if key in _PROPERTIES}

    def close(self) -> None:
        self._release()
        self._doc.close()

    def _release(self) -> None:
        if self._text is not None:
            self._text.close()
        if self._page is not None:
            self._page.close()
        self._page = self._text = self._walked = None
        self._page_index = -1

    def _load(self, index: int) -> Any:
        if index != self._page_index:
            self._release()
            self._page = self._doc[index]
            self._page_index = index
        return self._page

    def _textpage(self, index: int) -> Any:
        page = self._load(index)
        if self._text is None:
            self._text = page.get_textpage()
        return self._text

    def size(self, index: int) -> tuple[float, float]:
        left, bottom, right, top = self._box(index)
        return right - left, top - bottom

    def _box(self, index: int) -> tuple[float, float, float, float]:
        page = self._load(index)
        left, bottom, right, top = page.get_cropbox()
        return float(left), float(bottom), float(right), float(top)

    def has_text(self, index: int) -> bool:
        """Whether the page has any character that is not whitespace (cheap: no boxes read)."""
        text = self._textpage(index)
        return bool(text.get_text_range().strip())

    def glyphs(self, index: int) -> list[Glyph]:
        """Every visible character of the page in content order (whitespace only as breaks)."""
        textpage = self._textpage(index).raw
        left, _, _, top = self._box(index)
        count = raw.FPDFText_CountChars(textpage)
        box = raw.FS_RECTF()
        ink_left, ink_right, ink_bottom, ink_top = (ctypes.c_double() for _ in range(4))
        get_unicode, get_box, get_ink = raw.FPDFText_GetUnicode, raw.FPDFText_GetLooseCharBox, raw.FPDFText_GetCharBox
        get_size, get_weight = raw.FPDFText_GetFontSize, raw.FPDFText_GetFontWeight
        out: list[Glyph] = []
        brk = 0
        bold = False
        size = 0.0
        matrix = raw.FS_MATRIX()
        get_matrix = raw.FPDFText_GetMatrix
        for k in range(max(count, 0)):
            code = get_unicode(textpage, k)
            if code in (10, 13):
                brk = NEWLINE
                continue
            if code in _SPACES:
                brk = brk or (INFERRED if code == 32 and raw.FPDFText_IsGenerated(textpage, k) == 1 else SPACE)
                continue
            if code == 2 and raw.FPDFText_IsHyphen(textpage, k) == 1:
                code = 0x2D  # PDFium's mark for a hyphen that ends a line (the word is rejoined)
            if 0xD800 <= code <= 0xDFFF:
                continue  # half of a surrogate pair: PDFium reports each half; the text keeps neither
            get_box(textpage, k, box)
            x0, x1 = box.left, box.right
            if get_ink(textpage, k, ink_left, ink_right, ink_bottom, ink_top) and ink_right.value > ink_left.value:
                x0, x1 = ink_left.value, ink_right.value
            if brk or not out:  # font and size are read where a word starts
                bold = get_weight(textpage, k) >= _BOLD_WEIGHT
                size = get_size(textpage, k)
                if get_matrix(textpage, k, matrix):  # the size as drawn: times the text's scale
                    size *= math.hypot(matrix.c, matrix.d) or 1.0
            out.append((chr(code), x0 - left, top - box.top, x1 - left, top - box.bottom, size, bold, brk))
            brk = 0
        return out

    def rules(self, index: int) -> list[Rule]:
        """Horizontal and vertical ruling lines: straight path segments and thin filled rectangles."""
        paths, _ = self._objects(index)
        if len(paths) > _MAX_PATHS:
            return []
        left, _, _, top = self._box(index)
        rules: list[Rule] = []
        left_, bottom_, right_, top_ = (ctypes.c_float() for _ in range(4))
        for obj, matrix in paths:
            if not raw.FPDFPageObj_GetBounds(obj, left_, bottom_, right_, top_):
                continue
            # a line or a thin bar: one rule
            if min(right_.value - left_.value, top_.value - bottom_.value) <= _RULE_WIDTH:
                found = [matrix.bounds((left_.value, bottom_.value, right_.value, top_.value))]
            elif not _stroked(obj) and raw.FPDFPath_CountSegments(obj) > _MAX_FILLED_SEGMENTS:
                continue  # a filled shape (a glyph outline, a chart), not the borders of cells
            else:
                found = list(_segments(obj, _matrix(obj).multiply(matrix)))
            for x0, y0, x1, y1 in found:
                rules.append((min(x0, x1) - left, top - max(y0, y1), max(x0, x1) - left, top - min(y0, y1)))
        return [r for r in rules if min(r[2] - r[0], r[3] - r[1]) <= _RULE_WIDTH]

    def has_images(self, index: int) -> bool:
        return bool(self._objects(index)[1])

    def images(self, index: int, gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]:
        return page_images(self.image_objects(index), index + 1, gate)

    def image_objects(self, index: int) -> Iterator[tuple[tuple[float, float, float, float], Any]]:
        """Each image object of the page: where it is drawn (top-left origin) and the object."""
        page = self._load(index)
        left, _, _, top = self._box(index)
        left_, bottom_, right_, top_ = (ctypes.c_float() for _ in range(4))
        for obj, matrix in self._objects(index)[1]:
            if not raw.FPDFPageObj_GetBounds(obj, left_, bottom_, right_, top_):
                continue
            x0, y0, x1, y1 = matrix.bounds((left_.value, bottom_.value, right_.value, top_.value))
            yield (x0 - left, top - y1, x1 - left, top - y0), pdfium.PdfImage(obj, page=page, pdf=self._doc)

    def _objects(self, index: int) -> tuple[list[tuple[Any, Matrix]], list[tuple[Any, Matrix]]]:
        """The page's path and image objects, also those inside form XObjects, each with the matrix
        from its container's space to the page's (read once per page, with PDFium's C calls)."""
        if self._walked is None or self._walked[0] != index:
            paths: list[tuple[Any, Matrix]] = []
            images: list[tuple[Any, Matrix]] = []
            _walk(self._load(index).raw, None, Matrix(), 0, paths, images)
            self._walked = (index, paths, images)
        return self._walked[1], self._walked[2]

    def render(self, index: int, zoom: float) -> Image.Image:
        page = self._load(index)
        bitmap = page.render(scale=zoom, may_draw_forms=True)
        try:
            image: Image.Image = bitmap.to_pil().convert("RGB")
        finally:
            bitmap.close()
        return image


def _walk(page: Any, form: Any, matrix: Matrix, depth: int, paths: list[tuple[Any, Matrix]],
          images: list[tuple[Any, Matrix]]) -> None:
    count = raw.FPDFFormObj_CountObjects(form) if form is not None else raw.FPDFPage_CountObjects(page)
    for i in range(max(count, 0)):
        obj = raw.FPDFFormObj_GetObject(form, i) if form is not None else raw.FPDFPage_GetObject(page, i)
        if not obj:
            continue
        kind = raw.FPDFPageObj_GetType(obj)
        if kind == raw.FPDF_PAGEOBJ_PATH:
            paths.append((obj, matrix))
        elif kind == raw.FPDF_PAGEOBJ_IMAGE:
            images.append((obj, matrix))
        elif kind == raw.FPDF_PAGEOBJ_FORM and depth < _MAX_FORM_DEPTH:
            _walk(page, obj, _matrix(obj).multiply(matrix), depth + 1, paths, images)


def _matrix(obj: Any) -> Matrix:
    m = raw.FS_MATRIX()
    if not raw.FPDFPageObj_GetMatrix(obj, m):
        return Matrix()
    return Matrix(m.a, m.b, m.c, m.d, m.e, m.f)


def _stroked(path: Any) -> bool:
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    return bool(raw.FPDFPath_GetDrawMode(path, fill, stroke)) and bool(stroke.value)


def _segments(path: Any, matrix: Matrix) -> Iterator[tuple[float, float, float, float]]:
    """Straight axis-aligned segments of a path object in page space (a rectangle gives four;
    a thin filled rectangle is a rule of its own, its box)."""
    count = raw.FPDFPath_CountSegments(path)
    x, y = ctypes.c_float(), ctypes.c_float()
    points: list[tuple[float, float, int, bool]] = []
    for i in range(max(count, 0)):
        seg = raw.FPDFPath_GetPathSegment(path, i)
        if not seg or not raw.FPDFPathSegment_GetPoint(seg, x, y):
            continue
        px, py = matrix.apply(x.value, y.value)
        kind = raw.FPDFPathSegment_GetType(seg)
        if kind == raw.FPDF_SEGMENT_BEZIERTO:
            return  # a curve: a drawn shape, not the border of a cell
        points.append((px, py, kind, bool(raw.FPDFPathSegment_GetClose(seg))))
    start: tuple[float, float] | None = None
    prev: tuple[float, float] | None = None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    if points and (max(xs) - min(xs) <= _RULE_WIDTH or max(ys) - min(ys) <= _RULE_WIDTH):
        yield min(xs), min(ys), max(xs), max(ys)  # a thin bar or a single line: one rule
        return
    for px, py, kind, close in points:
        if kind == raw.FPDF_SEGMENT_MOVETO or prev is None:
            start = prev = (px, py)
            continue
        if kind == raw.FPDF_SEGMENT_LINETO:
            yield from _straight(prev, (px, py))
        prev = (px, py)
        if close and start is not None:
            yield from _straight(prev, start)
            prev = start


def _straight(a: tuple[float, float], b: tuple[float, float]) -> Iterator[tuple[float, float, float, float]]:
    if abs(a[0] - b[0]) <= 0.5 or abs(a[1] - b[1]) <= 0.5:
        yield min(a[0], b[0]), min(a[1], b[1]), max(a[0], b[0]), max(a[1], b[1])


# the information dictionary's entries a parse keeps, as every engine names them (properties.py)
_PROPERTIES = {"Title": "title", "Author": "author", "Subject": "subject", "CreationDate": "creation_date",
               "ModDate": "mod_date"}

"""Images of a PDF page for the PDF parser: image XObjects (``get_images``) and inline images
(``BI … ID … EI``), each checked by the asset gate (``assets.py``) before it is decoded where
its size is known from the file, and admitted (typed, downscaled or left out) after."""

from __future__ import annotations

import math
import re
from typing import Any

import pymupdf

from ultimate_rag.domain.models import ParsedAsset

from .assets import DOWNSCALE_MAX_SIDE, AssetGate
from .limits import ParseLimits

Rect = tuple[float, float, float, float]
# formats MuPDF hands back that the asset gate keeps as they are; others (JBIG2, JPX, PNM) become PNG
_KEPT_FORMATS = frozenset({"png", "jpeg", "jpg", "gif", "bmp", "tiff", "webp"})
_INLINE_IMAGE = re.compile(rb"(?<![A-Za-z0-9_])BI\s*/")  # the inline image operator and its first key


def page_images(doc: pymupdf.Document, page: pymupdf.Page, number: int,
                gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]:
    """Every image kept from one page, where it is drawn (x0, y0, x1, y1) and as its asset."""
    return _referenced(doc, page, number, gate) + _inline(page, number, gate)


def _referenced(doc: pymupdf.Document, page: pymupdf.Page, number: int,
                gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]:
    """Images drawn from an image XObject, with their original bytes where the format allows."""
    items: list[tuple[Rect, ParsedAsset]] = []
    seen: set[int] = set()
    limits = gate.limits
    for info in page.get_images(full=True):
        xref, width, height, filter_ = info[0], info[2], info[3], info[8]
        if xref in seen or xref <= 0:
            continue
        seen.add(xref)
        if width < limits.min_image_side or height < limits.min_image_side:
            continue  # an icon or spacer, too small to be worth keeping
        what = f"an image on page {number} ({width}×{height} pixels)"
        if not gate.decodable(width, height, what, jpeg=filter_ == "DCTDecode"):  # before get_image_rects
            continue
        rects = _placements(page, info, width * height > limits.max_image_pixels)
        if not rects:
            continue  # not drawn on this page
        data = _image_bytes(doc, xref, width, height, filter_, limits)
        if data is None:
            gate.warn(f"{what} was left out: it cannot be decoded")
            continue
        asset = gate.admit(ParsedAsset(locator_key=f"page-{number}/xref-{xref}", data=data,
                                       mime_type="application/octet-stream", page=number), what,
                           reduced=width * height > limits.max_image_pixels)
        if asset is not None:
            rect = rects[0]
            items.append(((rect.x0, rect.y0, rect.x1, rect.y1), asset))
    return items


def _placements(page: pymupdf.Page, info: tuple[Any, ...], oversized: bool) -> list[pymupdf.Rect]:
    """Where the image is drawn. ``get_image_rects`` decodes the image (to hash it), so an image
    over the pixel limit is placed with ``get_image_bbox``, which does not."""
    try:
        if not oversized:
            return list(page.get_image_rects(info[0]))
        rect = page.get_image_bbox(info)
        return [rect] if rect.is_valid and not rect.is_infinite and not rect.is_empty else []
    except Exception:
        return []


def _image_bytes(doc: pymupdf.Document, xref: int, width: int, height: int, filter_: str,
                 limits: ParseLimits) -> bytes | None:
    """The stored image (JPEG stays byte-identical, and the gate downscales it cheaply); other
    formats the gate does not keep, and other images over the pixel limit, come as a PNG that
    MuPDF has halved until it fits in the gate's downscale square."""
    oversized = width * height > limits.max_image_pixels
    try:
        if not oversized or filter_ == "DCTDecode":
            extracted = doc.extract_image(xref)
            if not extracted or not extracted.get("image"):
                return None
            if str(extracted.get("ext", "")).lower() in _KEPT_FORMATS:
                return bytes(extracted["image"])
        pix = pymupdf.Pixmap(doc, xref)
        halvings = math.ceil(math.log2(max(width, height) / DOWNSCALE_MAX_SIDE)) if oversized else 0
        if halvings > 0:
            pix.shrink(halvings)
        if pix.colorspace is not None and pix.colorspace.n not in (1, 3):
            pix = pymupdf.Pixmap(pymupdf.csRGB, pix)
        return bytes(pix.tobytes("png"))
    except Exception:
        return None  # an image MuPDF cannot decode is left out; the text still counts


def _inline(page: pymupdf.Page, number: int, gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]:
    """Inline images (``BI … ID … EI`` in the content stream, as reportlab writes them) have no
    xref, so ``get_images`` misses them; MuPDF's image blocks carry their bytes and position.
    Only pages whose content stream has the ``BI`` operator are looked at (finding the xrefs
    hashes every image of the page)."""
    try:
        if not _INLINE_IMAGE.search(page.read_contents()):
            return []
        inline = [info for info in page.get_image_info(xrefs=True) if info.get("xref") == 0]
    except Exception:
        return []
    limits = gate.limits
    inline = [info for info in inline if info["width"] >= limits.min_image_side
              and info["height"] >= limits.min_image_side and gate.decodable(
                  info["width"], info["height"], f"an inline image on page {number} "
                                                 f"({info['width']}×{info['height']} pixels)")]
    if not inline:
        return []
    clip = pymupdf.Rect(inline[0]["bbox"])
    for info in inline[1:]:
        clip |= pymupdf.Rect(info["bbox"])
    try:
        blocks = page.get_text("dict", flags=pymupdf.TEXT_PRESERVE_IMAGES, clip=clip).get("blocks", ())
    except Exception:
        return []
    wanted = {tuple(round(v, 1) for v in info["bbox"]) for info in inline}
    items: list[tuple[Rect, ParsedAsset]] = []
    found = 0
    for block in blocks:
        bbox = tuple(round(v, 1) for v in block.get("bbox", ()))
        if block.get("type") != 1 or bbox not in wanted or not block.get("image"):
            continue
        found += 1
        what = f"an inline image on page {number} ({block.get('width')}×{block.get('height')} pixels)"
        key = f"page-{number}/inline-{found}"
        asset = gate.admit(ParsedAsset(locator_key=key, data=bytes(block["image"]),
                                       mime_type="application/octet-stream", page=number), what)
        if asset is not None:
            items.append((tuple(block["bbox"]), asset))
    return items

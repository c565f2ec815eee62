"""Images of a PDF page read with PDFium (the default engine): every image object, inline images
(``BI … ID … EI``) and images inside form XObjects included. Each is checked by the asset gate
(``assets.py``) from its declared size before anything is decoded, and admitted (typed,
downscaled or left out) after. A JPEG (``DCTDecode``) or JPEG 2000 stream is kept as it is
stored (served byte-identical; the gate converts JPEG 2000 to PNG); any other image is decoded by
PDFium and written as a PNG, pixel for pixel."""

from __future__ import annotations

import hashlib
import io
import logging
from typing import Any

from ultimate_rag.domain.models import ParsedAsset

from .assets import DOWNSCALE_MAX_SIDE, AssetGate
from .pdf_engine import Rect

log = logging.getLogger(__name__)

_STORED_AS_IS = (["DCTDecode"], ["JPXDecode"])


def page_images(objects: Any, number: int, gate: AssetGate) -> list[tuple[Rect, ParsedAsset]]:
    """The images kept from one page (``objects``: ``PdfiumPdf.image_objects``), where each is
    drawn and as its asset. The same image drawn twice on a page is kept once."""
    limits = gate.limits
    items: list[tuple[Rect, ParsedAsset]] = []
    seen: set[bytes] = set()
    for ordinal, (rect, obj) in enumerate(objects, start=1):
        try:
            width, height = obj.get_px_size()
            filters = list(obj.get_filters())
        except Exception:
            continue
        if width < limits.min_image_side or height < limits.min_image_side:
            continue  # an icon or spacer, too small to be worth keeping
        what = f"an image on page {number} ({width}×{height} pixels)"
        if not gate.decodable(width, height, what, jpeg=filters == ["DCTDecode"]):
            continue
        oversized = width * height > limits.max_image_pixels
        data = _image_bytes(obj, filters, oversized)
        if data is None:
            gate.warn(f"{what} was left out: it cannot be decoded")
            continue
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if digest in seen:
            continue
        seen.add(digest)
        asset = gate.admit(ParsedAsset(locator_key=f"page-{number}/image-{ordinal}", data=data,
                                       mime_type="application/octet-stream", page=number), what, reduced=oversized)
        if asset is not None:
            items.append((rect, asset))
    return items


def _image_bytes(obj: Any, filters: list[str], oversized: bool) -> bytes | None:
    """The stored stream for JPEG and JPEG 2000; any other image decoded by PDFium as a PNG (an
    image over the pixel limit halved until it fits the gate's downscale square)."""
    try:
        if filters in _STORED_AS_IS:
            return bytes(obj.get_data(decode_simple=False))
        bitmap = obj.get_bitmap(render=False)  # freed with the object; the image may share its buffer
        image = bitmap.to_pil()
        if oversized:
            while max(image.size) > DOWNSCALE_MAX_SIDE:
                image = image.reduce(2)
        if image.mode not in ("1", "L", "RGB", "RGBA"):
            image = image.convert("RGB")
        out = io.BytesIO()
        image.save(out, "PNG", compress_level=3)  # 40 % less CPU than the default 6, no larger here
        del bitmap  # only now: the PNG is written
        return out.getvalue()
    except Exception as exc:  # an image PDFium cannot decode is left out; the text still counts
        log.info("PDF image not decoded: %s: %s", exc.__class__.__name__, exc)
        return None

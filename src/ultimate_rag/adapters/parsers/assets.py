"""The one gate every image found in a document passes before it becomes an asset (PDF, DOCX,
HTML ``data:`` URIs).

* **Type**: the header is decoded with Pillow; only PNG, JPEG, GIF, WebP, BMP and TIFF are kept,
  and the MIME type recorded is the decoded format's, never what the document declared. JPEG 2000
  and PNM (common in PDFs) are converted to PNG; anything else (SVG, HTML, unknown bytes) is left
  out.
* **One image** over ``max_image_pixels`` or ``max_image_bytes`` is downscaled (to fit the pixel
  limit and ``DOWNSCALE_MAX_SIDE``) or, when that is impossible, left out. Downscaling never
  holds a full-size copy: a JPEG decodes at 1/2-1/8 scale, an 8-bit PNG is read band by band
  (``png_bands.py``), anything else is decoded once and reduced a strip at a time. Either way a warning
  goes into ``ParsedDocument.metadata["warnings"]``; the document itself goes on.
* **The whole document** over ``max_assets`` images or ``max_asset_bytes`` fails
  (``InvalidDocumentError``).

Sizes known before reading (a zip entry's declared size, a ``data:`` URI's length) are checked
with ``too_large`` first, so an oversized image is never read into memory at all.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, replace
from typing import Any

from PIL import Image, UnidentifiedImageError

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import ParsedAsset

from .limits import ParseLimits
from .png_bands import reduced_png

# the decoded format (Pillow's name) -> the MIME type recorded and served
ALLOWED_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "GIF": "image/gif",
                   "WEBP": "image/webp", "BMP": "image/bmp", "TIFF": "image/tiff"}
_CONVERTIBLE = ("JPEG2000", "PPM")  # decoded and stored as PNG
# the only Pillow plugins ever asked to read a header (MPO comes from the JPEG plugin)
_OPENERS = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF", *_CONVERTIBLE)
DOWNSCALE_MAX_SIDE = 4096  # a downscaled image fits in this square (and in the pixel limit)
# images over this many times the pixel limit are left out, never decoded; a JPEG decodes at 1/8
# scale (1/64 of the memory) when it is downscaled, so it may be larger
DECODE_CEILING = 4
JPEG_DECODE_CEILING = 64
_STRIP_PIXELS = 4 * 1024 * 1024  # pixels converted and reduced at a time when an image is shrunk
MAX_WARNINGS = 50
WARNINGS_KEY = "warnings"

# Pillow's own bomb check would refuse to even read the size of a large image; ours come first.
Image.MAX_IMAGE_PIXELS = None


class _Skip(Exception):
    """The image cannot be kept; the message says why, for the document's warning."""


@dataclass(slots=True)
class AssetGate:
    """Admits a document's images one by one, keeping the document-wide totals and the warnings."""

    limits: ParseLimits
    warnings: list[str] = field(default_factory=list)
    count: int = 0
    total_bytes: int = 0

    def too_large(self, size: int, what: str) -> bool:
        """True (with a warning) when a size known before reading is over the per-image limit."""
        if size <= self.limits.max_image_bytes:
            return False
        self.warn(f"{what} was left out: it is {_mb(size)}, more than the limit of "
                  f"{_mb(self.limits.max_image_bytes)} for one image")
        return True

    def decodable(self, width: int, height: int, what: str, *, jpeg: bool = False) -> bool:
        """False (with a warning) for an image too large to decode even for downscaling."""
        reason = _undecodable(width, height, self.limits, jpeg)
        if reason:
            self.warn(f"{what} was left out: {reason}")
        return not reason

    def admit(self, asset: ParsedAsset, what: str, *, reduced: bool = False) -> ParsedAsset | None:
        """The asset as it may be stored, or None (with a warning) when it cannot be kept.
        ``reduced``: the parser already shrank an image that was over the limits (say so)."""
        try:
            data, mime, note, size = conform(asset.data, self.limits)
        except _Skip as skip:
            self.warn(f"{what} was left out: {skip}")
            return None
        if reduced and not note:
            note = _downscaled(size, self.limits)
        if note:
            self.warn(f"{what} {note}")
        self.count += 1
        self.total_bytes += len(data)
        if self.count > self.limits.max_assets:
            raise InvalidDocumentError(f"the document has more than {self.limits.max_assets} images, the limit")
        if self.total_bytes > self.limits.max_asset_bytes:
            raise InvalidDocumentError(
                f"the document's images add up to more than {_mb(self.limits.max_asset_bytes)}, the limit")
        return replace(asset, data=data, mime_type=mime)

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)
        elif len(self.warnings) == MAX_WARNINGS:
            self.warnings.append("more images were left out or downscaled; later warnings are not listed")


def with_warnings(metadata: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """``metadata`` with ``warnings`` appended to its ``warnings`` list (other parts of a parser
    may have added their own)."""
    if not warnings:
        return metadata
    return {**metadata, WARNINGS_KEY: [*metadata.get(WARNINGS_KEY, ()), *warnings]}


def conform(data: bytes, limits: ParseLimits) -> tuple[bytes, str, str, tuple[int, int]]:
    """(bytes, MIME type, note, size) of an image within the limits; raises _Skip otherwise."""
    try:
        image = Image.open(io.BytesIO(data), formats=_OPENERS)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise _Skip("it is not an image in an allowed raster format (PNG, JPEG, GIF, WebP, BMP, TIFF)") from exc
    with image:
        width, height = image.size
        if width < 1 or height < 1:
            raise _Skip("it has no pixels")
        reason = _undecodable(width, height, limits, image.format in ("JPEG", "MPO"))
        if reason:
            raise _Skip(reason)
        pixels = width * height
        if image.format in ALLOWED_FORMATS and pixels <= limits.max_image_pixels \
                and len(data) <= limits.max_image_bytes:
            return data, ALLOWED_FORMATS[str(image.format)], "", (width, height)
        over = pixels > limits.max_image_pixels or len(data) > limits.max_image_bytes
        out, mime, size = _reencode(image, data, limits)
    return out, mime, _downscaled(size, limits) if over else "", size


def _downscaled(size: tuple[int, int], limits: ParseLimits) -> str:
    return (f"was downscaled to {size[0]}×{size[1]} pixels to fit the limits of {limits.max_image_pixels} "
            f"pixels and {_mb(limits.max_image_bytes)} per image")


def _reencode(image: Image.Image, data: bytes, limits: ParseLimits) -> tuple[bytes, str, tuple[int, int]]:
    """Decode (JPEG at a reduced scale, PNG band by band, others once and reduced in strips),
    shrink until it fits, encode as PNG or JPEG."""
    width, height = image.size
    side = min(DOWNSCALE_MAX_SIDE, max(width, height))
    scale = min(1.0, math.sqrt(limits.max_image_pixels / (width * height)), side / max(width, height))
    photo = image.format in ("JPEG", "MPO")
    mode = "RGBA" if _has_alpha(image) else "RGB"
    try:
        # an integer factor at least as strong as the scale: the result may be a little smaller than it
        source = None if photo else _reduced(image, data, max(1, math.ceil(1 / scale - 1e-9)), mode)
        for _ in range(6):
            target = (max(1, int(width * scale)), max(1, int(height * scale)))
            if photo:
                image.draft("RGB", target)  # JPEG decodes at 1/2, 1/4 or 1/8 scale: far less memory
                frame = image.convert(mode)
            else:
                assert source is not None
                frame = source.copy()
            if frame.size != target:
                frame.thumbnail(target, Image.Resampling.LANCZOS)
            buffer = io.BytesIO()
            if photo and frame.mode == "RGB":
                frame.save(buffer, "JPEG", quality=85, optimize=True)
            else:
                frame.save(buffer, "PNG", optimize=len(data) > limits.max_image_bytes)
            if buffer.tell() <= limits.max_image_bytes:
                mime = "image/jpeg" if photo and frame.mode == "RGB" else "image/png"
                return buffer.getvalue(), mime, frame.size
            scale /= 2
    except MemoryError as exc:
        raise _Skip(f"it is {width}×{height} pixels and needs too much memory to downscale") from exc
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise _Skip(f"it cannot be decoded ({exc})"[:200]) from exc
    raise _Skip(f"it cannot be made smaller than the limit of {_mb(limits.max_image_bytes)} per image")


def _reduced(image: Image.Image, data: bytes, factor: int, mode: str) -> Image.Image:
    """The image in ``mode``, each side divided by ``factor`` (box filter), with as little held at
    once as the format allows: an 8-bit PNG is read band by band (never whole); anything else is
    decoded once in its own mode and converted and reduced a strip at a time (no full-size copy)."""
    if factor > 1 and image.format == "PNG":
        banded = reduced_png(data, factor)
        if banded is not None:
            return banded if banded.mode == mode else banded.convert(mode)
    image.load()
    if factor == 1:
        return image if image.mode == mode else image.convert(mode)
    width, height = image.size
    out = Image.new(mode, (-(-width // factor), -(-height // factor)))
    strip = max(factor, (_STRIP_PIXELS // max(width, 1)) // factor * factor)
    for top in range(0, height, strip):
        part = image.crop((0, top, width, min(height, top + strip)))
        out.paste((part if part.mode == mode else part.convert(mode)).reduce(factor), (0, top // factor))
    return out


def _undecodable(width: int, height: int, limits: ParseLimits, jpeg: bool) -> str:
    factor = JPEG_DECODE_CEILING if jpeg else DECODE_CEILING
    if width * height <= factor * limits.max_image_pixels:
        return ""
    return (f"it is {width}×{height} pixels, too large to downscale (more than {factor} times "
            f"the limit of {limits.max_image_pixels} pixels)")


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB" if size >= 100 * 1024 else f"{size} bytes"

"""Uploaded images (PNG, JPEG, TIFF with all its pages, WebP): the text read by OCR (``ocr.py``),
each frame a page, every paragraph citing its page and its box in pixels. The image itself is
the document's asset (one per TIFF page), so a citation can show it, and the optional vision step
can describe it (the OCR path for scripts the bundled models do not read, such as Korean).

The type comes from the content (the extension must agree); Pillow opens only these four formats,
and an image too large to decode within the limits fails the document before it is decoded.
"""

from __future__ import annotations

import io

from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator

from . import progress
from .assets import DECODE_CEILING, AssetGate, with_warnings
from .limits import ParseLimits
from .ocr import AUTO, FORCE, fit_for_ocr, foreign_script_warning
from .ocr_layout import admitted, read_page
from .text_quality import page_ranges

IMAGE_KINDS = {"binary:image/png": (".png",), "binary:image/apng": (".png",),
               "binary:image/jpeg": (".jpg", ".jpeg"),
               "binary:image/tiff": (".tif", ".tiff"), "binary:image/webp": (".webp",)}
_FORMATS = ("PNG", "JPEG", "TIFF", "WEBP")


class ImageParser:
    extensions = (".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
    name = "image"
    version = "1.1.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension in IMAGE_KINDS.get(detected_kind, ())

    def parse(self, source: DocumentSource) -> ParsedDocument:
        try:
            image = Image.open(io.BytesIO(source.content), formats=_FORMATS)
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
            raise InvalidDocumentError(f"the image cannot be read ({exc})"[:300]) from exc
        with image:
            width, height = image.size
            if width * height > DECODE_CEILING * self.limits.max_image_pixels:
                raise InvalidDocumentError(
                    f"the image is {width}×{height} pixels, more than {DECODE_CEILING} times the limit of "
                    f"{self.limits.max_image_pixels} pixels")
            # TIFF pages are pages; the frames of an animated PNG or WebP are not (the first is read)
            frames = getattr(image, "n_frames", 1) if image.format == "TIFF" else 1
            if frames > self.limits.max_pages:
                raise InvalidDocumentError(f"the image has {frames} pages, more than the limit of "
                                           f"{self.limits.max_pages}")
            if frames > self.limits.max_ocr_pages and self.limits.ocr in (AUTO, FORCE):
                raise InvalidDocumentError(f"the image has {frames} pages to read by OCR, more than the limit of "
                                           f"{self.limits.max_ocr_pages} (ULTIMATE_RAG_PARSE_MAX_OCR_PAGES)")
            return self._pages(image, source.content, frames)

    def _pages(self, image: Image.Image, content: bytes, frames: int) -> ParsedDocument:
        gate = AssetGate(self.limits)
        blocks: list[Block] = []
        assets: list[ParsedAsset] = []
        ocr = self.limits.ocr in (AUTO, FORCE)
        read = 0
        foreign: list[int] = []
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            if number > frames:
                break
            progress.report(number - 1, frames)
            try:
                frame.load()
                page = frame.copy()
            except (OSError, ValueError, SyntaxError, EOFError) as exc:
                raise InvalidDocumentError(f"page {number} of the image cannot be decoded ({exc})"[:300]) from exc
            asset = self._asset(page, content if frames == 1 and image.format != "TIFF" else None, number, gate)
            key = asset.locator_key if asset is not None else None
            if asset is not None:
                assets.append(asset)
                blocks.append(Block(kind="figure", text=_figure_text(number, frames),
                                    locator=SourceLocator(page=number), asset_ids=(asset.locator_key,)))
            if ocr:
                # a phone photo is stored sideways with an EXIF orientation: OCR reads it upright
                # (its boxes are then in the upright image's pixels)
                fitted, scale = fit_for_ocr(ImageOps.exif_transpose(page), self.limits.ocr_max_pixels)
                result = read_page(fitted, number, scale=scale, asset_key=key)
                found, crops = admitted(result, gate)
                foreign += [number] if result.foreign_script else []
                read += bool(found)
                blocks.extend(found)
                assets.extend(crops)
        progress.report(frames, frames)
        warnings = list(gate.warnings)
        if not ocr:
            warnings.append("OCR is off: the image's text was not read")
        elif foreign:
            pages = f"{'pages' if len(foreign) > 1 else 'page'} {page_ranges(foreign)} of {frames}"
            warnings.append(foreign_script_warning(pages if frames > 1 else "the image"))
        elif not read:
            warnings.append("OCR found no text in the image")
        metadata = {"page_count": frames, "width": image.size[0], "height": image.size[1],
                    "format": image.format, "ocr_pages": read}
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, warnings), assets=tuple(assets))

    def _asset(self, page: Image.Image, original: bytes | None, number: int, gate: AssetGate) -> ParsedAsset | None:
        """The image as it was uploaded (one frame), else the page encoded as PNG; through the gate."""
        data = original
        if data is None:
            buffer = io.BytesIO()
            page.convert("RGBA" if "A" in page.getbands() else "RGB").save(buffer, "PNG")
            data = buffer.getvalue()
        return gate.admit(ParsedAsset(locator_key=f"page-{number}/image", data=data, mime_type="image/png",
                                      page=number), f"the image of page {number}")


def _figure_text(number: int, frames: int) -> str:
    return f"[Image on page {number}]" if frames > 1 else "[Image]"

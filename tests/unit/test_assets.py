"""The asset gate (adapters/parsers/assets.py) on real images written by Pillow, and through the
PDF, DOCX and HTML parsers on files built here: allowed raster types by their decoded header,
per-image limits that downscale or leave out with a warning, per-document limits that fail, an
oversized DOCX part never read, and inline PDF images extracted."""

from __future__ import annotations

import base64
import io
import random
import tracemalloc
import zipfile

import pymupdf
import pytest
from PIL import Image

from ultimate_rag.adapters.parsers.assets import AssetGate
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import ParsedAsset

from .test_format_parsers import ENGLISH, make_docx, make_pdf, parse, png

SVG = (b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" onload="alert(document.cookie)">'
       b"<script>alert(1)</script><rect width='40' height='40'/></svg>")
HTML = b"<html><body><script>alert(document.cookie)</script>not an image</body></html>"


def picture(fmt: str, size: tuple[int, int] = (40, 30), noise: bool = False) -> bytes:
    image = Image.new("RGB", size, (30, 120, 200))
    if noise:  # incompressible pixels: the encoded file is about as large as the raw pixels
        image = Image.frombytes("RGB", size, random.Random(5).randbytes(size[0] * size[1] * 3))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def asset(data: bytes, declared: str = "application/octet-stream") -> ParsedAsset:
    return ParsedAsset(locator_key="k", data=data, mime_type=declared)


@pytest.mark.parametrize(("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                           ("WEBP", "image/webp"), ("BMP", "image/bmp"), ("TIFF", "image/tiff")])
def test_allowed_rasters_are_kept_as_they_are_with_their_decoded_type(fmt: str, mime: str) -> None:
    data = picture(fmt)
    gate = AssetGate(ParseLimits())
    kept = gate.admit(asset(data, declared="image/svg+xml"), "the image")  # the declared type is ignored
    assert kept is not None and kept.data == data and kept.mime_type == mime
    assert gate.warnings == []


def test_jpeg_2000_is_converted_to_png() -> None:
    kept = AssetGate(ParseLimits()).admit(asset(picture("JPEG2000")), "the image")
    assert kept is not None and kept.mime_type == "image/png"
    assert Image.open(io.BytesIO(kept.data)).size == (40, 30)


@pytest.mark.parametrize("data", [SVG, HTML, b"", b"\x89PNG\r\n\x1a\n" + b"\0" * 40, random.Random(1).randbytes(500)])
def test_svg_html_and_garbage_are_left_out_with_a_warning(data: bytes) -> None:
    gate = AssetGate(ParseLimits())
    assert gate.admit(asset(data, declared="image/png"), "the image x") is None
    assert gate.warnings == ["the image x was left out: it is not an image in an allowed raster format "
                             "(PNG, JPEG, GIF, WebP, BMP, TIFF)"]
    assert gate.count == 0


def test_an_image_over_the_pixel_limit_is_downscaled_with_a_warning() -> None:
    gate = AssetGate(ParseLimits(max_image_pixels=10_000))
    kept = gate.admit(asset(picture("JPEG", (400, 300))), "the photo")
    assert kept is not None and kept.mime_type == "image/jpeg"
    width, height = Image.open(io.BytesIO(kept.data)).size
    assert width * height <= 10_000 and abs(width / height - 4 / 3) < 0.05
    assert gate.warnings == [f"the photo was downscaled to {width}×{height} pixels to fit the limits of 10000 "
                             "pixels and 32.0 MB per image"]


def test_an_image_over_the_byte_limit_is_downscaled_or_left_out() -> None:
    noisy = picture("PNG", (300, 300), noise=True)  # about 270 KB
    gate = AssetGate(ParseLimits(max_image_bytes=100_000))
    kept = gate.admit(asset(noisy), "the chart")
    assert kept is not None and len(kept.data) <= 100_000 and kept.mime_type == "image/png"
    assert "the chart was downscaled to" in gate.warnings[0]
    tiny = AssetGate(ParseLimits(max_image_bytes=50))
    assert tiny.admit(asset(noisy), "the chart") is None
    assert tiny.warnings == ["the chart was left out: it cannot be made smaller than the limit of 50 bytes per image"]


def test_a_header_claiming_a_huge_image_is_left_out_without_decoding() -> None:
    import zlib

    data = bytearray(picture("PNG", (20, 20)))
    data[16:24] = (60_000).to_bytes(4, "big") * 2  # IHDR width and height: 60000×60000
    data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")  # and its checksum
    gate = AssetGate(ParseLimits())
    assert gate.admit(asset(bytes(data)), "the image") is None
    assert "60000×60000 pixels, too large to downscale (more than 4 times the limit" in gate.warnings[0]


def test_document_wide_limits_fail_the_document() -> None:
    gate = AssetGate(ParseLimits(max_assets=2))
    for _ in range(2):
        assert gate.admit(asset(picture("PNG")), "an image") is not None
    with pytest.raises(InvalidDocumentError, match="more than 2 images, the limit"):
        gate.admit(asset(picture("PNG")), "an image")
    data = picture("PNG", (100, 100), noise=True)
    gate = AssetGate(ParseLimits(max_asset_bytes=len(data) * 2))
    gate.admit(asset(data), "an image")
    gate.admit(asset(data), "an image")
    with pytest.raises(InvalidDocumentError, match="images add up to more than"):
        gate.admit(asset(data), "an image")


def test_warnings_are_bounded() -> None:
    gate = AssetGate(ParseLimits())
    for _ in range(80):
        gate.admit(asset(SVG), "an icon")
    assert len(gate.warnings) == 51 and gate.warnings[-1].startswith("more images were left out")


# -- through the parsers -----------------------------------------------------------------------

def _replace_parts(docx: bytes, parts: dict[str, bytes]) -> bytes:
    original = zipfile.ZipFile(io.BytesIO(docx))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in original.namelist():
            archive.writestr(name, parts.get(name, original.read(name)))
    return out.getvalue()


def _media_name(docx: bytes) -> str:
    return next(n for n in zipfile.ZipFile(io.BytesIO(docx)).namelist() if n.startswith("word/media/"))


def test_docx_image_part_that_inflates_to_64_mb_is_never_read() -> None:
    base = make_docx(png())
    bomb = _replace_parts(base, {_media_name(base): b"\0" * (64 << 20)})
    assert len(bomb) < 200_000
    tracemalloc.start()
    try:
        parsed = parse("bomb.docx", bomb, ParseLimits(max_image_bytes=1 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # the 64 MB part was never inflated
    assert parsed.assets == () and ENGLISH in parsed.text
    assert "[Image: A red square logo]" in parsed.text  # the alt text stays where the image was
    assert parsed.metadata["warnings"] == [
        f"the part {_media_name(base)} was left out: it is 64.0 MB, more than the limit of 1.0 MB for one image"]


def test_docx_image_part_holding_html_is_left_out() -> None:
    base = make_docx(png())
    types = zipfile.ZipFile(io.BytesIO(base)).read("[Content_Types].xml").replace(
        b'ContentType="image/png"', b'ContentType="text/html"')
    hostile = _replace_parts(base, {_media_name(base): HTML, "[Content_Types].xml": types})
    parsed = parse("xss.docx", hostile)
    assert parsed.assets == ()
    assert parsed.metadata["warnings"] == [
        f"the image {_media_name(base)} was left out: it is not an image in an allowed raster format "
        "(PNG, JPEG, GIF, WebP, BMP, TIFF)"]


def test_html_data_uris_svg_left_out_png_kept_oversized_never_decoded() -> None:
    def img(mime: str, data: bytes, alt: str) -> str:
        return f'<img alt="{alt}" src="data:{mime};base64,{base64.b64encode(data).decode()}">'

    page = (f"<html><body><p>{ENGLISH}</p>{img('image/svg+xml', SVG, 'Vector')}{img('image/gif', png(), 'Logo')}"
            f"{img('image/png', b'x' * 3_000_000, 'Huge')}</body></html>")
    parsed = parse("page.html", page.encode(), ParseLimits(max_image_bytes=1_000_000))
    assert [(a.mime_type, a.data) for a in parsed.assets] == [("image/png", png())]  # its decoded type
    assert "[Image: Vector]" in parsed.text and "[Image: Huge]" in parsed.text
    assert parsed.metadata["warnings"] == [
        "a data: image (image/svg+xml) was left out: it is not an image in an allowed raster format "
        "(PNG, JPEG, GIF, WebP, BMP, TIFF)",
        "a data: image (image/png) was left out: it is 2.9 MB, more than the limit of 1.0 MB for one image",
    ]


def inline_image_pdf(side: int = 24) -> bytes:
    """A PDF whose image is inline in the content stream (``BI … ID … EI``, as reportlab writes
    it), between two paragraphs; PyMuPDF writes the page, the inline image is appended by hand."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Text above the inline picture.", fontsize=11)
    page.insert_text((72, 400), "Text below the inline picture.", fontsize=11)
    page.clean_contents()
    xref = page.get_contents()[0]
    pixels = bytes((i * 7) % 256 for i in range(side * side * 3))
    inline = (b"q 96 0 0 96 100 500 cm BI /W %d /H %d /BPC 8 /CS /RGB ID " % (side, side)) + pixels + b"\nEI Q\n"
    doc.update_stream(xref, doc.xref_stream(xref) + b"\n" + inline)
    return doc.tobytes()


def test_pdf_inline_image_becomes_an_asset_with_page_and_position() -> None:
    data = inline_image_pdf()
    assert pymupdf.open(stream=data, filetype="pdf")[0].get_images() == []  # no XObject: inline only
    parsed = parse("inline.pdf", data)
    assert len(parsed.assets) == 1
    found = parsed.assets[0]
    # PDFium reads inline images as image objects like the others (PyMuPDF's keys say "inline-1")
    assert found.locator_key == "page-1/image-1" and found.page == 1 and found.mime_type == "image/png"
    assert Image.open(io.BytesIO(found.data)).size == (24, 24)
    order = [(b.kind, b.text) for b in parsed.blocks]
    assert order == [("paragraph", "Text above the inline picture."), ("figure", "[Image on page 1]"),
                     ("paragraph", "Text below the inline picture.")]
    assert parsed.blocks[1].asset_ids == ("page-1/image-1",) and parsed.blocks[1].locator.page == 1


def test_pdf_inline_image_over_the_pixel_limit_is_downscaled() -> None:
    parsed = parse("inline.pdf", inline_image_pdf(60), ParseLimits(max_image_pixels=1000))
    assert len(parsed.assets) == 1 and "Text below the inline picture." in parsed.text
    width, height = Image.open(io.BytesIO(parsed.assets[0].data)).size
    assert width * height <= 1000
    assert parsed.metadata["warnings"][0].startswith("an image on page 1 (60×60 pixels) was downscaled to")


def test_pdf_image_that_mupdf_shrinks_under_the_limit_still_gets_a_warning() -> None:
    """freeculture.pdf's 9258×12259 fax image: MuPDF halves a long side over 4096 itself; the
    document still says the image was downscaled."""
    parsed = parse("wide.pdf", make_pdf(image=png(5000, 20)), ParseLimits(max_image_pixels=60_000))
    [found] = parsed.assets
    assert Image.open(io.BytesIO(found.data)).size == (2500, 10)
    assert parsed.metadata["warnings"] == ["an image on page 1 (5000×20 pixels) was downscaled to 2500×10 pixels "
                                           "to fit the limits of 60000 pixels and 32.0 MB per image"]


def test_the_asset_settings_reach_the_parse_limits() -> None:
    from ultimate_rag.adapter_factories import parse_limits
    from ultimate_rag.settings import Settings

    limits = parse_limits(Settings(parse_max_image_pixels=4, parse_max_image_bytes=5, parse_max_asset_bytes=6,
                                   parse_max_assets=7))
    assert (limits.max_image_pixels, limits.max_image_bytes, limits.max_asset_bytes, limits.max_assets) == (4, 5, 6, 7)

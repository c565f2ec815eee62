"""A large PNG shrunk band by band, never decoded whole.

Pillow decodes a PNG into one buffer of 4 bytes per pixel (RGB is stored as RGBX), so an image
near 4× the pixel limit (400 million pixels by default: 1.6 GB) cannot be decoded inside a parse
process's memory limit, let alone converted. PNG rows depend only on the row above them (the
scanline filters), so the image can be read in bands: the compressed stream is inflated a band
at a time, each band (with the previous band's last row, unfiltered, above it) is wrapped as a
small PNG that Pillow decodes, reduced by an integer factor and pasted into the result. Peak
memory is one band plus the reduced image.

Only what this covers is attempted: 8-bit samples (every colour type, palette and ``tRNS``
included), not interlaced. Anything else returns None and is decoded whole, within the gate's
ceiling.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator

from PIL import Image

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_COPIED = (b"PLTE", b"tRNS")  # what a band needs besides its header and pixels
BAND_BYTES = 16 * 1024 * 1024  # inflated scanline bytes per band


def reduced_png(data: bytes, factor: int) -> Image.Image | None:
    """The image reduced by ``factor`` (each side divided, rounded up; box filter), decoded band
    by band; None when the file is not an 8-bit non-interlaced PNG or cannot be read."""
    try:
        header, copied, stream = _chunks(data)
    except (ValueError, struct.error):
        return None
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or interlace or colour not in _CHANNELS or width < 1 or height < 1:
        return None
    row = width * _CHANNELS[colour] + 1  # the filter byte, then the samples
    band = max(factor, (BAND_BYTES // row) // factor * factor)
    inflater = zlib.decompressobj()
    pending = b""
    above: bytes | None = None
    result: Image.Image | None = None
    for top in range(0, height, band):
        rows = min(band, height - top)
        need = rows * row
        pending = _inflate(inflater, stream, pending, need)
        if len(pending) < need:
            return None  # truncated
        raw, pending = pending[:need], pending[need:]
        lead = b"" if above is None else b"\x00" + above  # the row above, unfiltered ("None" filter)
        image = _decode(header, copied, rows + (above is not None), lead + raw)
        if image is None:
            return None
        if above is not None:
            image = image.crop((0, 1, width, rows + 1))
        above = image.crop((0, rows - 1, width, rows)).tobytes()
        if image.mode not in ("L", "LA", "RGB", "RGBA"):  # palette indices cannot be averaged: colours can
            image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        small = image.reduce(factor) if factor > 1 else image
        if result is None:
            result = Image.new(small.mode, (-(-width // factor), -(-height // factor)))
        result.paste(small, (0, top // factor))
    return result


def _inflate(inflater: zlib._Decompress, stream: Iterator[bytes], pending: bytes, need: int) -> bytes:
    """``pending`` with inflated bytes added until it holds ``need`` (never much more: a
    compression bomb inflates only as far as the rows asked for), or all there is."""
    while len(pending) < need:
        if inflater.unconsumed_tail:
            pending += inflater.decompress(inflater.unconsumed_tail, need - len(pending))
            continue
        chunk = next(stream, None)
        if chunk is None:
            return pending + inflater.flush()[:need - len(pending)]
        pending += inflater.decompress(chunk, need - len(pending))
    return pending


def _decode(header: bytes, copied: list[tuple[bytes, bytes]], rows: int, raw: bytes) -> Image.Image | None:
    """A band as a PNG of its own: the header with the band's height, the palette and
    transparency, the band's scanlines."""
    band_header = header[:4] + struct.pack(">I", rows) + header[8:]
    out = io.BytesIO()
    out.write(_SIGNATURE)
    for kind, body in [(b"IHDR", band_header), *copied, (b"IDAT", zlib.compress(raw, 1)), (b"IEND", b"")]:
        out.write(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body)))
    try:
        image = Image.open(io.BytesIO(out.getvalue()), formats=("PNG",))
        image.load()
    except (OSError, ValueError, SyntaxError):
        return None
    return image


def _chunks(data: bytes) -> tuple[bytes, list[tuple[bytes, bytes]], Iterator[bytes]]:
    """The header, the chunks a band copies, and an iterator over the compressed pixel data."""
    if not data.startswith(_SIGNATURE):
        raise ValueError("not a PNG")
    header = b""
    copied: list[tuple[bytes, bytes]] = []
    spans: list[tuple[int, int]] = []
    at = len(_SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = (at + 8, at + 8 + length)
        if kind == b"IHDR":
            header = data[body[0]:body[1]]
        elif kind in _COPIED:
            copied.append((kind, data[body[0]:body[1]]))
        elif kind == b"IDAT":
            spans.append(body)
        elif kind == b"IEND":
            break
        at = body[1] + 4
    if len(header) != 13 or not spans:
        raise ValueError("no header or no pixels")
    view = memoryview(data)
    return header, copied, (bytes(view[a:b]) for a, b in spans)

"""OCR throughput and memory (``python -m bench.parse --ocr 10``): a generated scanned PDF (every
page one 200 dpi image of 24 lines, English and Chinese), parsed the way the worker parses it —
isolated, in a forked child with the default time and memory limits — timed, with the child's peak
RSS sampled every 20 ms. The first parse of a fresh child also loads the models (reported apart)."""

from __future__ import annotations

import asyncio
import io
import time

import pymupdf
from PIL import Image, ImageDraw, ImageFont

from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.domain.models import DocumentSource
from ultimate_rag.settings import Settings

_FONT = "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"  # scripts/test.sh installs fonts-wqy-zenhei
_LINES = ("The harbour ferry leaves every twenty minutes from pier four in the morning.",
          "港口渡轮每二十分钟从四号码头出发，晚上停运。",
          "Invoice 4711: rope, signal flares and two foghorn membranes, paid in March.")


def scanned_pdf(pages: int) -> bytes:
    font = ImageFont.truetype(_FONT, 30)
    doc = pymupdf.open()
    for n in range(pages):
        image = Image.new("L", (1700, 2200), 255)
        draw = ImageDraw.Draw(image)
        draw.text((150, 120), f"Page {n + 1}", font=font, fill=0)
        for i in range(24):
            draw.text((150, 200 + i * 70), _LINES[(i + n) % len(_LINES)], font=font, fill=0)
        buffer = io.BytesIO()
        image.save(buffer, "PNG")
        page = doc.new_page(width=612, height=792)
        page.insert_image(page.rect, stream=buffer.getvalue())
    return doc.tobytes()


def measure(pages: int) -> dict[str, float]:
    from .parse import RssSampler

    data = scanned_pdf(pages)
    settings = Settings()
    runner = ParseRunner(timeout_seconds=max(600.0, pages * 60.0), memory_limit_mb=settings.parse_memory_limit_mb)
    parser = PdfParser()

    async def run() -> tuple[float, float, int]:
        one = DocumentSource(None, "one.pdf", "application/pdf", scanned_pdf(1))
        start = time.perf_counter()
        await runner.parse(parser, one)  # the forkserver, and a child that loads the models
        first = time.perf_counter() - start
        with RssSampler() as sampler:
            start = time.perf_counter()
            parsed = await runner.parse(parser, DocumentSource(None, "scan.pdf", "application/pdf", data))
            elapsed = time.perf_counter() - start
        assert parsed.metadata.get("ocr_pages") == pages, parsed.metadata
        return first, elapsed, sampler.peak_child

    first, elapsed, peak = asyncio.run(run())
    return {"pages": pages, "seconds": elapsed, "pps": pages / elapsed, "first_page_s": first,
            "peak_child_mb": peak / 2**20, "limit_mb": settings.parse_memory_limit_mb, "size_mb": len(data) / 2**20}


def report(pages: int) -> None:
    r = measure(pages)
    print(f"OCR: {r['pages']:.0f}-page scanned PDF (200 dpi, 24 lines a page, {r['size_mb']:.1f} MB), isolated:")
    print(f"  {r['seconds']:.1f} s = {r['pps']:.2f} pages/s ({r['seconds'] / r['pages']:.2f} s a page); "
          f"a one-page scan in a fresh child (models loaded): {r['first_page_s']:.1f} s")
    print(f"  parse child peak RSS {r['peak_child_mb']:.0f} MB (limit {r['limit_mb']} MB of address space)")

"""OCR throughput, side by side in one run on the same pages (``python -m bench.parse --ocr 8``):

* **library**: RapidOCR called directly in this process, with the product's engine settings and
  thread count (``ocr.engine_params``), on the page images, the engine loaded once beforehand;
* **product**: the same pages as a scanned PDF parsed the way the worker parses it — isolated, in
  a child forked from the forkserver with the default memory limit, niceness and time limits,
  which loads the models, renders every page at 200 dpi, runs OCR and the layout model, encodes
  the page image and sends the result back over the pipe.

Ratio = product pages/s ÷ library pages/s (the goal is ≥ 0.9). The library runs before and after
the product and its mean is used, so a load change during the run shows as a spread. Also: the
character error rate of both against the pages' known text (bench/ocr_pages.py; English and
Chinese pages alternate), the child's peak RSS sampled every 20 ms, and a one-page scan in a
fresh child (what a single uploaded image costs, model loading included)."""

from __future__ import annotations

import asyncio
import statistics
import time

import pymupdf

from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.ocr import MIN_SCORE, engine_params
from ultimate_rag.adapters.parsers.onnx import inference_threads
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.domain.models import DocumentSource
from ultimate_rag.settings import Settings

from .ocr_pages import Page, cer, chinese_page, english_page, png


def pages_of(count: int) -> list[Page]:
    return [english_page(i) if i % 2 == 0 else chinese_page(100 + i) for i in range(count)]


def scanned_pdf(pages: list[Page]) -> bytes:
    doc = pymupdf.open()
    for page in pages:
        pdf_page = doc.new_page(width=612, height=792)
        pdf_page.insert_image(pdf_page.rect, stream=png(page.image))
    return doc.tobytes()


def library_pass(pages: list[Page]) -> tuple[float, float, list[str]]:
    """Seconds and CPU seconds for the pages, the engine loaded once before, and each page's text."""
    from rapidocr import RapidOCR

    engine = RapidOCR(params=engine_params(inference_threads()))
    engine(pages[0].image.convert("RGB"))  # sessions are created on first use
    texts = []
    start, cpu = time.perf_counter(), time.process_time()
    for page in pages:
        out = engine(page.image.convert("RGB"))
        read = zip(getattr(out, "txts", None) or (), getattr(out, "scores", None) or (), strict=True)
        texts.append("".join(text for text, score in read if score >= MIN_SCORE))
    return time.perf_counter() - start, time.process_time() - cpu, texts


def measure(count: int) -> dict[str, float]:
    from .parse import RssSampler

    pages = pages_of(count)
    data = scanned_pdf(pages)
    settings = Settings()
    runner = ParseRunner(timeout_seconds=settings.parse_timeout_seconds,
                         page_allowance_seconds=settings.parse_page_seconds,
                         document_timeout_seconds=settings.parse_document_timeout_seconds,
                         memory_limit_mb=settings.parse_memory_limit_mb)
    parser = PdfParser()

    async def product() -> tuple[float, float, str, int, float]:
        one = DocumentSource(None, "one.pdf", "application/pdf", scanned_pdf(pages[:1]))
        start = time.perf_counter()
        await runner.parse(parser, one)  # starts the forkserver; a one-page scan in a fresh child
        first = time.perf_counter() - start
        with RssSampler() as sampler:
            start = time.perf_counter()
            parsed = await runner.parse(parser, DocumentSource(None, "scan.pdf", "application/pdf", data))
            elapsed = time.perf_counter() - start
        assert parsed.metadata.get("ocr_pages") == count, parsed.metadata
        child_cpu = max(sampler.child_cpu.values(), default=0.0)  # the parse child (the forkserver idles)
        text = "".join(b.text for b in parsed.blocks if b.kind != "figure")  # not "[Image on page 3]"
        return elapsed, first, text, sampler.peak_child, child_cpu

    before, cpu_before, library_texts = library_pass(pages)
    elapsed, first, product_text, peak, product_cpu = asyncio.run(product())
    after, cpu_after, _ = library_pass(pages)
    library = statistics.mean([before, after])
    library_cpu = statistics.mean([cpu_before, cpu_after])
    truth = "".join(page.truth for page in pages)
    return {"pages": count, "threads": inference_threads(), "library_s": library, "library_spread_s": abs(after - before),
            "product_s": elapsed, "ratio": library / elapsed, "first_page_s": first,
            "library_cpu_s": library_cpu, "product_cpu_s": product_cpu, "cpu_ratio": library_cpu / max(product_cpu, 1e-9),
            "cer_library": cer("".join(library_texts), truth), "cer_product": cer(product_text, truth),
            "peak_child_mb": peak / 2**20, "limit_mb": settings.parse_memory_limit_mb, "size_mb": len(data) / 2**20}


def report(count: int) -> None:
    r = measure(count)
    print(f"OCR, {r['pages']:.0f} scanned pages (200 dpi, English and Chinese alternating, {r['size_mb']:.1f} MB PDF), "
          f"{r['threads']:.0f} threads:")
    print(f"  library in-process: {r['library_s']:.1f} s = {r['pages'] / r['library_s']:.3f} pages/s "
          f"(before/after spread {r['library_spread_s']:.1f} s), CER {r['cer_library']:.2%}")
    print(f"  product (isolated child, limits, nice 5, render + layout + page image): {r['product_s']:.1f} s = "
          f"{r['pages'] / r['product_s']:.3f} pages/s, CER {r['cer_product']:.2%}")
    print(f"  ratio product/library: {r['ratio']:.2f}x (goal >= 0.9)")
    print(f"  CPU time: library {r['library_cpu_s']:.1f} s, product's parse child {r['product_cpu_s']:.1f} s "
          f"(models loaded, pages rendered, layout, page images): pages per CPU second ratio {r['cpu_ratio']:.2f}x")
    print(f"  a one-page scan in a fresh child (models loaded): {r['first_page_s']:.1f} s; parse child peak RSS "
          f"{r['peak_child_mb']:.0f} MB (limit {r['limit_mb']} MB of address space)")

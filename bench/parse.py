"""Parsing throughput and worker memory (issue 4).

1. Pages per second for a generated 200-page PDF with an image on every page: the PDF parser in
   this process, and through the isolated runner the worker uses (a forked child with the time
   and memory limits, the result sent back over a pipe).
2. Peak memory (RSS) of the worker process, and separately of its parse child, while the real
   pipeline (PostgreSQL, storage, chunking, the local embedder, READY) ingests a ~100 MB PDF made
   of incompressible JPEG images and text. Sampled every 20 ms with psutil.

    .venv/bin/python -m bench.parse [--pages 200] [--big-mb 100]

3. ``--corpus tests/corpus``: quality and speed on the regression corpus (bench/parse_corpus.py).
4. ``--ocr N``: OCR pages per second and the parse child's peak memory on an N-page scanned PDF
   (bench/parse_ocr.py).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import shutil
import threading
import time
import uuid
from pathlib import Path

import psutil
import pymupdf

from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import DocumentSource, KnowledgeBaseSettings
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings

from .common import fresh_database, machine

WORDS = ("harbour ferry pier timetable island passenger ticket departure arrival weather season "
         "captain route bridge tide schedule cargo night morning service notice").split()


def noise_jpeg(width: int, height: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(width * height * 3)
    return pymupdf.Pixmap(pymupdf.csRGB, width, height, data, 0).tobytes("jpeg", jpg_quality=95)


def paragraph(rng: random.Random, words: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def text_page(doc: pymupdf.Document, rng: random.Random, number: int) -> pymupdf.Page:
    page = doc.new_page()
    page.insert_text((72, 60), f"Section {number}", fontsize=18)
    box = pymupdf.Rect(72, 80, 540, 390)
    spare = page.insert_textbox(box, "\n\n".join(paragraph(rng, 50) for _ in range(4)), fontsize=9)
    assert spare >= 0, "the text did not fit its box"
    return page


def pdf_with_images(pages: int) -> bytes:
    """Every page: a heading, four paragraphs, a distinct 320×240 JPEG and its caption."""
    rng = random.Random(1)
    doc = pymupdf.open()
    for n in range(pages):
        page = text_page(doc, rng, n + 1)
        page.insert_image(pymupdf.Rect(72, 400, 392, 640), stream=noise_jpeg(320, 240, n))
        page.insert_text((72, 656), f"Figure {n + 1}: harbour view {n + 1}", fontsize=8)
    return doc.tobytes(garbage=0)


def big_pdf(target_mb: int) -> bytes:
    """About ``target_mb`` MB: pages of text, each with a distinct ~3.9 MB incompressible JPEG."""
    rng = random.Random(2)
    doc = pymupdf.open()
    size, n = 0, 0
    while size < target_mb * 1024 * 1024:
        image = noise_jpeg(1600, 1200, 1000 + n)
        page = text_page(doc, rng, n + 1)
        page.insert_image(pymupdf.Rect(72, 400, 540, 750), stream=image)
        size += len(image)
        n += 1
    return doc.tobytes(garbage=0)


def throughput(data: bytes, pages: int, repeats: int = 3) -> dict[str, float]:
    source = DocumentSource(None, "bench.pdf", "application/pdf", data)
    parser = PdfParser()
    best_inline = min(_timed(lambda: parser.parse(source)) for _ in range(repeats))
    runner = ParseRunner(timeout_seconds=600)

    async def isolated() -> float:  # in one event loop, as the worker runs it
        await runner.parse(parser, source)  # starts the forkserver once
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            await runner.parse(parser, source)
            times.append(time.perf_counter() - start)
        return min(times)

    best_isolated = asyncio.run(isolated())
    return {"inline_s": best_inline, "inline_pps": pages / best_inline,
            "isolated_s": best_isolated, "isolated_pps": pages / best_isolated}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class RssSampler:
    """Peak RSS of this process and, separately, of the largest child process, every 20 ms; and the
    CPU time of every child as last seen (the forkserver's children are this process's too)."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.peak_self = self.peak_child = 0
        self.child_cpu: dict[int, float] = {}  # CPU seconds (user + system) of each child, last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_self = max(self.peak_self, self.me.memory_info().rss)
                for child in self.me.children(recursive=True):
                    try:
                        self.peak_child = max(self.peak_child, child.memory_info().rss)
                        times = child.cpu_times()
                        self.child_cpu[child.pid] = times.user + times.system
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            time.sleep(0.02)


async def ingest_big(target_mb: int) -> dict[str, object]:
    url, server, root = fresh_database()
    try:
        data = big_pdf(target_mb)
        size, pages = len(data), pymupdf.open(stream=data, filetype="pdf").page_count
        settings = Settings(database_url=url, data_dir=root / "data", admin_key="bench",
                            max_upload_bytes=len(data) + 1, lease_seconds=600)
        container = build(settings, url=url)
        await container.open()
        try:
            embedder_ready = container.embedding.embedder.count_tokens("warm up")  # load the model before measuring
            assert embedder_ready > 0
            kb = await container.ingest.knowledge_bases.create(f"bench-{uuid.uuid4().hex[:6]}", "", KnowledgeBaseSettings())
            doc_id = uuid.uuid4()
            key = f"{kb.id}/{doc_id}/source.pdf"
            await container.infra.storage.put(key, data, "application/pdf")
            await container.ingest.documents.create_with_job(
                document_id=doc_id, knowledge_base_id=kb.id, filename="big.pdf", mime_type="application/pdf",
                size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), object_key=key, max_attempts=1)
            del data  # from here on only the worker holds the document's bytes
            baseline = psutil.Process().memory_info().rss
            worker = container.worker(WorkerConfig(heartbeat_seconds=30))
            with RssSampler() as sampler:
                start = time.perf_counter()
                await worker.run_until_idle()
                elapsed = time.perf_counter() - start
            doc = await container.ingest.documents.get(doc_id)
            assets = await container.ingest.documents.assets(doc_id)
            return {"size_mb": size / 2**20, "pages": pages, "status": doc.status.value, "error": doc.error_message or "", "seconds": elapsed,
                    "chunks": doc.chunk_count, "assets": len(assets), "baseline_mb": baseline / 2**20,
                    "peak_worker_mb": sampler.peak_self / 2**20, "peak_child_mb": sampler.peak_child / 2**20}
        finally:
            await container.close()
    finally:
        server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--corpus", type=Path, help="measure the regression corpus in this folder instead "
                        "(tests/corpus): see bench/parse_corpus.py")
    parser.add_argument("--ocr", type=int, metavar="PAGES", help="measure OCR on a scanned PDF of this many "
                        "pages instead: see bench/parse_ocr.py")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.ocr:
        from .parse_ocr import report

        report(args.ocr)
        return
    if args.corpus:
        from .parse_corpus import main as corpus_main

        corpus_main(args.corpus)
        return

    data = pdf_with_images(args.pages)
    t = throughput(data, args.pages)
    print(f"{args.pages}-page PDF with an image per page ({len(data) / 2**20:.1f} MB):")
    print(f"  in process: {t['inline_s']:.2f} s = {t['inline_pps']:.0f} pages/s")
    print(f"  isolated (forked child, limits, result over a pipe): {t['isolated_s']:.2f} s = "
          f"{t['isolated_pps']:.0f} pages/s")

    r = asyncio.run(ingest_big(args.big_mb))
    print(f"{r['size_mb']:.0f} MB PDF ({r['pages']} pages, one ~3.9 MB JPEG each) through the full pipeline:")
    print(f"  {r['status']} in {r['seconds']:.1f} s, {r['chunks']} chunks, {r['assets']} assets {r['error']}")
    print(f"  worker RSS: {r['baseline_mb']:.0f} MB before, peak {r['peak_worker_mb']:.0f} MB; "
          f"parse child peak {r['peak_child_mb']:.0f} MB (limit {Settings().parse_memory_limit_mb} MB)")


if __name__ == "__main__":
    main()

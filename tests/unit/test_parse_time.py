"""Parse time limits (adapters/parsers/parse_time.py, isolation.py): counted in the child's CPU
time, per page and per document, a stalled child caught by wall-clock time, and a page limit
checked before any OCR. The rules run on fake clocks (seconds, not minutes); one real child is
stopped by its per-page limit, with a reason that names OCR, the page and the setting."""

from __future__ import annotations

import asyncio
import io
import multiprocessing
import os
import threading

import pymupdf
import pytest

from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.isolation import ParseRunner, _wait
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.parse_time import TimeLimits, Watch, cpu_ceiling, cpu_seconds
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource

from .office_builders import image_bytes, scan_image

LIMITS = TimeLimits(page_seconds=300, page_allowance_seconds=120, document_seconds=3600)


class Fake:
    """A wall clock and a CPU clock the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu: float | None = 0.0

    def run(self, wall: float, cpu: float) -> None:
        self.wall += wall
        if self.cpu is not None:
            self.cpu += cpu


def watch(fake: Fake, limits: TimeLimits = LIMITS) -> Watch:
    return Watch(limits, lambda: fake.cpu, lambda: fake.wall)


def test_a_busy_machine_does_not_fail_a_healthy_scan() -> None:
    """Four concurrent OCR parses on a loaded machine: each page takes 200 s of wall-clock time
    (over the old 300 s wall-clock limit after two pages) but only 40 s of CPU."""
    fake = Fake()
    w = watch(fake)
    for page in range(6):
        w.progress(page, 6, "OCR")
        for _ in range(20):
            fake.run(wall=10, cpu=2)
            assert w.passed() is None


def test_one_page_over_the_per_page_cpu_limit_names_ocr_the_page_and_the_setting() -> None:
    fake = Fake()
    w = watch(fake)
    w.progress(0, 6)
    fake.run(wall=5, cpu=4)
    w.progress(1, 6)
    w.progress(1, 6, "OCR")
    fake.run(wall=290, cpu=290)
    assert w.passed() is None
    fake.run(wall=20, cpu=20)
    assert w.passed() == ("OCR of page 2 of 6 took more than 300 seconds of CPU time, the limit for one page "
                          "(ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS)")


def test_every_page_restarts_the_page_count_but_the_document_has_a_budget() -> None:
    """Six pages of 200 CPU seconds each: no page is over 300, but the document's budget is
    6 × 120 = 720 seconds; a short document still gets the per-page limit."""
    fake = Fake()
    w = watch(fake)
    reason = None
    for page in range(6):
        w.progress(page, 6, "OCR")
        fake.run(wall=200, cpu=200)
        reason = reason or w.passed()
    assert reason == ("parsing the document's 6 pages took more than 720 seconds of CPU time, its budget "
                      "(6 × ULTIMATE_RAG_PARSE_PAGE_SECONDS=120, at most ULTIMATE_RAG_PARSE_DOCUMENT_TIMEOUT_SECONDS"
                      "=3600); it stopped during OCR of page 4")
    assert [LIMITS.budget(n) for n in (1, 2, 6, 100)] == [300, 300, 720, 3600]


def test_a_child_that_uses_no_cpu_is_stopped_as_stalled_and_without_proc_wall_time_counts() -> None:
    fake = Fake()
    w = watch(fake)
    w.progress(2, 5)
    fake.run(wall=299, cpu=0)
    assert w.passed() is None
    fake.run(wall=2, cpu=0)
    assert w.passed() == ("the parser stopped making progress during parsing page 3 of 5: it used no CPU time "
                          "for 300 seconds (ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS, at least 60)")
    quick = Fake()
    w = watch(quick, TimeLimits(page_seconds=0.5))  # a tiny limit: a busy minute without CPU is not a stall
    quick.run(wall=59, cpu=0)
    assert w.passed() is None
    quick.run(wall=2, cpu=0)
    assert (w.passed() or "").startswith("the parser stopped making progress")
    nowhere = Fake()
    nowhere.cpu = None  # no /proc: the limits count wall-clock time
    w = watch(nowhere)
    nowhere.run(wall=301, cpu=0)
    assert w.passed() == ("parsing took more than 300 seconds of CPU time, the limit for a document "
                          "(ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS)")


def test_the_childs_cpu_backstop_sits_past_the_parents_limits() -> None:
    assert cpu_ceiling(LIMITS, 0.0, 0) == 310
    assert cpu_ceiling(LIMITS, 100.0, 6) == 410  # this page's limit
    assert cpu_ceiling(LIMITS, 600.0, 6) == 730  # the document's budget
    spent = os.times()
    assert cpu_seconds(os.getpid()) == pytest.approx(spent.user + spent.system, abs=0.1)
    assert cpu_seconds(2**22 + 12345) is None


def test_wait_passes_progress_to_the_watch_and_returns_the_childs_result() -> None:
    receive, send = multiprocessing.Pipe(duplex=False)
    for message in (("progress", 0, 2, ""), ("progress", 1, 2, "OCR"), ("ok", "parsed")):
        send.send(message)

    class Alive:
        def is_alive(self) -> bool:
            return True

    fake = Fake()
    w = watch(fake)
    seen: list[tuple[int, int]] = []
    assert _wait(receive, Alive(), w, threading.Event(), lambda d, t: seen.append((d, t))) == ("ok", "parsed")
    assert seen == [(0, 2), (1, 2)] and (w.done, w.total, w.activity) == (1, 2, "OCR")
    fake.run(wall=400, cpu=400)
    assert _wait(receive, Alive(), w, threading.Event())[0] == "limit"


def test_a_real_ocr_child_past_its_cpu_limit_fails_with_a_readable_reason() -> None:
    data = image_bytes(scan_image(["Invoice 4711 covers the heron migration ledger"], size=(1200, 300), top=60), "PNG")
    src = DocumentSource(None, "scan.png", "image/png", data)
    runner = ParseRunner(timeout_seconds=1)
    with pytest.raises(InvalidDocumentError) as failed:
        asyncio.run(runner.parse(default_registry().resolve(src), src))
    assert str(failed.value) == ("OCR of page 1 of 1 took more than 1 second of CPU time, the limit for one page "
                                 "(ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS)")


def test_a_small_pdf_declaring_many_scanned_pages_is_refused_before_ocr() -> None:
    """600 pages that all show one image (the file stays small): over the 500 pages OCR may read,
    refused before the first page is read; a TIFF's pages likewise."""
    doc = pymupdf.open()
    xref = 0
    for _ in range(600):
        page = doc.new_page(width=612, height=792)
        if xref:
            page.insert_image(page.rect, xref=xref)
        else:
            xref = page.insert_image(page.rect, stream=image_bytes(scan_image(["x"], size=(170, 220)), "PNG"))
    data = doc.tobytes(garbage=1)
    assert len(data) < 400_000
    src = DocumentSource(None, "book.pdf", "application/pdf", data)
    with pytest.raises(InvalidDocumentError) as refused:
        default_registry().resolve(src).parse(src)
    assert str(refused.value) == ("the PDF has 600 pages to read by OCR (of 600), more than the limit of 500 "
                                  "(ULTIMATE_RAG_PARSE_MAX_OCR_PAGES)")
    with pytest.raises(InvalidDocumentError, match="the image has 3 pages to read by OCR, more than the limit of 2"):
        frames = [scan_image(["x"], size=(170, 220))] * 3
        tiff = io.BytesIO()
        frames[0].save(tiff, "TIFF", save_all=True, append_images=frames[1:])
        tif = DocumentSource(None, "fax.tif", "image/tiff", tiff.getvalue())
        default_registry(ParseLimits(max_ocr_pages=2)).resolve(tif).parse(tif)

"""OCR engines side by side on the same known pages (bench/ocr_pages.py): character error rate
per script, seconds per page and the process's peak memory, for whichever RapidOCR this Python
has installed — ``rapidocr`` 3.x (PP-OCRv6 small det/rec in its wheel, headless OpenCV) or
``rapidocr-onnxruntime`` 1.4.x (PP-OCRv4, full OpenCV). Two engines cannot share one environment
(both install ``cv2``), so run it once per environment, each in a fresh process:

    .venv/bin/python -m bench.ocr_engines [--threads 2] [--pages 4]
    /tmp/other-venv/bin/python -m bench.ocr_engines   # with PYTHONPATH=. (it imports only bench/)

Peak RSS is ``ru_maxrss`` of the process; "address space" is ``VmPeak`` (what ``RLIMIT_AS`` counts
in the parse child) after importing the library and after the run."""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import statistics
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np

from .ocr_pages import Page, accuracy_pages, cer

Recognize = Callable[[np.ndarray], list[tuple[list[list[float]], str, float]]]


def _vm(name: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def load_engine(threads: int, params: dict[str, object] | None = None) -> tuple[str, Recognize]:
    """The installed engine as (name, recognize(RGB array) -> [(box points, text, score)])."""
    try:
        module: Any = importlib.import_module("rapidocr")
    except ImportError:
        old = importlib.import_module("rapidocr_onnxruntime").RapidOCR(intra_op_num_threads=threads,
                                                                        inter_op_num_threads=1)

        def recognize_old(image: np.ndarray) -> list[tuple[list[list[float]], str, float]]:
            result, _ = old(image)
            return [(points, str(text), float(score)) for points, text, score in result or ()]

        return "rapidocr-onnxruntime 1.4.4 (PP-OCRv4)", recognize_old
    new = module.RapidOCR(params={"Global.log_level": "warning",
                                  "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                                  "EngineConfig.onnxruntime.inter_op_num_threads": 1, **(params or {})})

    def recognize_new(image: np.ndarray) -> list[tuple[list[list[float]], str, float]]:
        out = new(image)
        if out.boxes is None or out.txts is None:
            return []
        return [(box.tolist(), str(text), float(score))
                for box, text, score in zip(out.boxes, out.txts, out.scores, strict=True)]

    return f"rapidocr {metadata.version('rapidocr')} (PP-OCRv6 small)", recognize_new


def read_page(recognize: Recognize, page: Page) -> str:
    """The page's recognised lines top to bottom, left to right (single-column pages)."""
    lines = recognize(np.asarray(page.image.convert("RGB")))
    lines.sort(key=lambda item: (round(min(p[1] for p in item[0]) / 20), min(p[0] for p in item[0])))
    return "".join(text for _, text, _ in lines)


def measure(threads: int, count: int, params: dict[str, object] | None = None) -> dict[str, Any]:
    pages = accuracy_pages(count)
    base = _vm("VmSize")
    start = time.perf_counter()
    name, recognize = load_engine(threads, params)
    read_page(recognize, pages[-1])  # the sessions are created on first use: the warm-up
    load = time.perf_counter() - start
    after_load = _vm("VmPeak")
    results: dict[str, list[float]] = {}
    times: list[float] = []
    cpu: list[float] = []
    samples: dict[str, str] = {}
    for page in pages:
        t0, c0 = time.perf_counter(), time.process_time()
        text = read_page(recognize, page)
        if page.kind in ("en", "zh"):
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        results.setdefault(page.kind, []).append(cer(text, page.truth))
        if page.kind not in ("en", "zh"):
            samples[page.kind] = text[:80]
    return {"engine": name, "threads": threads, "params": params or {}, "load_and_first_page_s": round(load, 2),
            "seconds_per_page": round(statistics.mean(times), 2),
            "cpu_seconds_per_page": round(statistics.mean(cpu), 2),
            "cer": {kind: round(statistics.mean(values), 4) for kind, values in results.items()},
            "samples": samples,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "address_space_mb": {"before": round(base), "engine_loaded": round(after_load),
                                 "peak": round(_vm("VmPeak"))}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pages", type=int, default=4, help="English and Chinese pages each")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a rapidocr 3.x setting, e.g. Global.max_side_len=1600 (a JSON value)")
    args = parser.parse_args()
    params = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.param)}
    print(json.dumps(measure(args.threads, args.pages, params), ensure_ascii=False))


if __name__ == "__main__":
    main()

"""The layout model on scanned pages (``python -m bench.layout [--pages 2]``): its CPU cost a page
and its effect on reading order, on generated two-column pages whose text is known (a running
header, a title, two columns, a page number; bench/ocr_pages.py), English and Chinese.

Each page is read by OCR once; its lines are then put in order three ways and scored by the
character error rate against the text in reading order (title, left column, right column; the
header and the page number are furniture, not text):

* **lines by position**: top to bottom, left to right (how OCR pages were read before: the two
  columns interleave line by line);
* **paragraphs, no model**: ``ocr_layout.structure`` without regions (paragraphs found column by
  column, ordered by bands and columns);
* **layout model**: ``ocr_layout.structure`` with the regions ``layout.detect`` finds (titles,
  headers and footers, text regions).
"""

from __future__ import annotations

import argparse
import statistics
import time

from ultimate_rag.adapters.parsers import layout
from ultimate_rag.adapters.parsers.ocr import recognize
from ultimate_rag.adapters.parsers.ocr_layout import structure

from .common import machine
from .ocr_pages import cer, two_column_page


def measure(count: int) -> dict[str, dict[str, float]]:
    scores: dict[str, list[float]] = {"lines by position": [], "paragraphs, no model": [], "layout model": []}
    layout_cpu: list[float] = []
    ocr_cpu: list[float] = []
    for i in range(count):
        for zh in (False, True):
            page = two_column_page(10 + i, zh=zh)
            image = page.image.convert("RGB")
            start = time.process_time()
            lines = list(recognize(image).lines)
            ocr_cpu.append(time.process_time() - start)
            start = time.process_time()
            regions = layout.detect(image)
            layout_cpu.append(time.process_time() - start)
            by_position = sorted(lines, key=lambda li: (round(li.box[1] / max(li.height, 1.0) * 2), li.box[0]))
            plain = structure(lines, [], image, 1, scale=1.0, asset_key=None)
            modelled = structure(lines, regions, image, 1, scale=1.0, asset_key=None)
            scores["lines by position"].append(cer("".join(li.text for li in by_position), page.truth))
            scores["paragraphs, no model"].append(cer("".join(b.text for b in plain.blocks), page.truth))
            scores["layout model"].append(cer("".join(b.text for b in modelled.blocks), page.truth))
    return {"cer": {k: statistics.mean(v) for k, v in scores.items()},
            "cpu_seconds": {"ocr a page": statistics.mean(ocr_cpu), "layout a page": statistics.mean(layout_cpu[1:])}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=2, help="two-column pages of each language")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    r = measure(args.pages)
    print(f"{args.pages * 2} two-column pages (200 dpi, title + two columns, English and Chinese):")
    for name, value in r["cer"].items():
        print(f"  reading-order CER, {name}: {value:.2%}")
    cpu = r["cpu_seconds"]
    print(f"  CPU a page: OCR {cpu['ocr a page']:.2f} s, layout model {cpu['layout a page']:.2f} s "
          f"({cpu['layout a page'] / cpu['ocr a page']:.1%} of the OCR; the first call, which creates the session, "
          "not counted)")


if __name__ == "__main__":
    main()

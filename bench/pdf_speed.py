"""Pages per second of the PDF parser on text-dense files: parse only, in this process, CPU time
(``time.process_time``: the machine is shared, wall time is noise), best of 5 after one warm-up
parse, OCR off and the born-digital layout model off (``bench/pdf_layout.py`` measures that).

Side by side with another version of the parser: export its ``src`` and put it first on the path,
in the same run, e.g. the parser before PDFium (PyMuPDF, ``pdf`` 1.2.0) and this checkout:

    git archive c443ad7^1 src | tar -x -C /tmp/old
    for src in /tmp/old/src src; do PYTHONPATH=$src .venv/bin/python -m bench.pdf_speed FILE...; done
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import ultimate_rag
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.domain.models import DocumentSource

DEFAULT_FILES = ("tests/corpus/pdf/GeoTopo-komprimiert.pdf", "tests/corpus/pdf/pdflatex-4-pages.pdf",
                 "tests/corpus/pdf/multicolumn.pdf")


def pages_per_second(parser: PdfParser, path: Path, rounds: int = 5) -> tuple[int, float]:
    source = DocumentSource(None, path.name, "application/pdf", path.read_bytes())
    pages = int(str(parser.parse(source).metadata["page_count"]))
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        parser.parse(source)
        best = min(best, time.process_time() - start)
    return pages, pages / max(best, 1e-9)


def main() -> None:
    options = {"pdf_layout": False} if "pdf_layout" in ParseLimits.__dataclass_fields__ else {}
    parser = PdfParser(ParseLimits(ocr="off", **options))  # type: ignore[arg-type]  # older versions lack pdf_layout
    where = Path(ultimate_rag.__file__).parents[1]
    for name in sys.argv[1:] or DEFAULT_FILES:
        pages, speed = pages_per_second(parser, Path(name))
        print(f"{where}  pdf {parser.version}  {Path(name).name}  {pages} pages  {speed:.1f} pages/s (CPU)", flush=True)


if __name__ == "__main__":
    main()

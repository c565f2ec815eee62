"""Imported by the parse forkserver before it forks children (isolation.py): the light libraries
the parsers load on first use, so a parse child does not pay their import time.

Not the OCR stack or openpyxl: an address-space limit (``RLIMIT_AS``) counts what a library maps,
not what it uses, and OpenCV, onnxruntime, numpy and Shapely map about 900 MB between them. Every
child would carry that against its limit; imported in the child that needs them (ocr.py,
sheets.py), only OCR and XLSX parses do.

It also keeps the forkserver quiet when a worker dies (killed, or stopped hard) while a child is
being started for it: the new child then finds the pipe it reads its work from closed, and would
print an ``EOFError`` traceback for what is only a worker that went away."""

from __future__ import annotations

import importlib
import sys
from types import TracebackType

# the PDF engine: pypdfium2 loads PDFium (~0.1 s) and starts no thread
for _name in ("docx", "pptx", "lxml.html", "ultimate_rag.adapters.parsers.pdf_pdfium"):
    try:
        importlib.import_module(_name)
    except ImportError:  # a parser whose library is missing fails on its own, with its reason
        pass


_report = sys.excepthook


def _quiet_when_the_worker_is_gone(kind: type[BaseException], error: BaseException,
                                   trace: TracebackType | None) -> None:
    if issubclass(kind, EOFError | BrokenPipeError | ConnectionResetError):
        return
    _report(kind, error, trace)


sys.excepthook = _quiet_when_the_worker_is_gone

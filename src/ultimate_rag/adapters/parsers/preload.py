"""Imported by the parse forkserver before it forks children (isolation.py): the light libraries
the parsers load on first use, so a parse child does not pay their import time.

Not the OCR stack or openpyxl: an address-space limit (``RLIMIT_AS``) counts what a library maps,
not what it uses, and OpenCV, onnxruntime, numpy and Shapely map about 900 MB between them. Every
child would carry that against its limit; imported in the child that needs them (ocr.py,
sheets.py), only OCR and XLSX parses do."""

from __future__ import annotations

import importlib

# the PDF engine: pypdfium2 loads PDFium (~0.1 s) and starts no thread
for _name in ("docx", "pptx", "lxml.html", "ultimate_rag.adapters.parsers.pdf_pdfium"):
    try:
        importlib.import_module(_name)
    except ImportError:  # a parser whose library is missing fails on its own, with its reason
        pass

"""Imported by the parse forkserver before it forks children (isolation.py): the libraries the
parsers load on first use, so a parse child neither pays their import time (onnxruntime and
OpenCV take about a second) nor maps them after its memory limit applies. Only imports: the OCR
engine itself (onnxruntime sessions start threads) is created in the child (ocr.py)."""

from __future__ import annotations

import importlib

for _name in ("docx", "pptx", "openpyxl", "lxml.html", "numpy", "rapidocr_onnxruntime"):
    try:
        importlib.import_module(_name)
    except ImportError:  # a parser whose library is missing fails on its own, with its reason
        pass

"""Offline OCR with RapidOCR (``rapidocr-onnxruntime``, Apache-2.0): PP-OCRv4 detection, direction
classification and recognition models (Chinese and English) shipped inside the wheel and run by
onnxruntime on the CPU. No download, no network.

The engine is created once per parse process, on first use: the forkserver only imports the
library (onnxruntime starts threads when a session is created, and a fork after that is unsafe).
Recognised lines are grouped into paragraphs by position; each paragraph keeps its page and its
box on the page (``SourceLocator.bbox``).
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from typing import Any

from PIL import Image

from ultimate_rag.domain.models import Block, SourceLocator

OFF, AUTO, FORCE = "off", "auto", "force"
MODES = (OFF, AUTO, FORCE)
MIN_SCORE = 0.5  # recognised lines less certain than this are dropped
_engine = None
_engine_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in the image's pixels

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]


def _get_engine() -> Any:  # a RapidOCR (it ships no types)
    global _engine
    with _engine_lock:
        if _engine is None:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as exc:  # under the memory limit, a library that cannot be mapped
                if "failed to map" in str(exc) or "cannot allocate" in str(exc).lower():
                    raise MemoryError(str(exc)) from exc
                raise
            threads = max(1, min(4, os.cpu_count() or 1))
            _engine = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)
        return _engine


def fit_for_ocr(image: Image.Image, max_pixels: int) -> tuple[Image.Image, float]:
    """The image in RGB, scaled down to at most ``max_pixels``, and the scale applied."""
    scale = 1.0
    width, height = image.size
    if width * height > max_pixels:
        scale = math.sqrt(max_pixels / (width * height))
        image = image.resize((max(1, int(width * scale)), max(1, int(height * scale))), Image.Resampling.LANCZOS)
    if image.mode != "RGB":
        image = image.convert("RGB")
    return image, scale


def recognize(image: Image.Image) -> list[Line]:
    """The text lines RapidOCR reads in an RGB image, top to bottom."""
    import numpy as np

    try:
        result, _ = _get_engine()(np.asarray(image))
    except MemoryError:
        raise
    except Exception as exc:  # onnxruntime reports an allocation that failed as a RuntimeException
        if "bad_alloc" in str(exc) or "allocat" in str(exc).lower():
            raise MemoryError(str(exc)) from exc
        raise
    lines: list[Line] = []
    for points, text, score in result or ():
        text = " ".join(str(text).split())
        if not text or float(score) < MIN_SCORE:
            continue
        xs = [float(p[0]) for p in points]
        ys = [float(p[1]) for p in points]
        lines.append(Line(text, (min(xs), min(ys), max(xs), max(ys))))
    lines.sort(key=lambda line: (round(line.box[1] / max(line.height, 1.0) * 2), line.box[0]))
    return lines


def paragraphs(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into paragraphs: a line continues the paragraph above it when it starts under
    it (the boxes overlap horizontally), the gap is under ~0.8 line heights and the heights agree."""
    groups: list[list[Line]] = []
    for line in lines:
        if groups:
            last = groups[-1][-1]
            gap = line.box[1] - last.box[3]
            overlap = min(line.box[2], last.box[2]) - max(line.box[0], last.box[0])
            similar = 0.67 <= line.height / max(last.height, 1.0) <= 1.5
            if overlap > 0 and -0.5 * last.height <= gap <= 0.8 * last.height and similar:
                groups[-1].append(line)
                continue
        groups.append([line])
    return groups


def join_lines(texts: list[str]) -> str:
    """Lines of one paragraph as one text: CJK lines join without a space."""
    out = ""
    for text in texts:
        if out and not (_is_cjk(out[-1]) and _is_cjk(text[0])):
            out += " "
        out += text
    return out


def ocr_blocks(image: Image.Image, page: int, *, scale: float, asset_key: str | None) -> list[Block]:
    """Paragraph blocks of the text OCR reads in ``image``; boxes divided by ``scale`` (image pixels
    per unit of the page's coordinates), each block pointing at the page image asset."""
    blocks: list[Block] = []
    for group in paragraphs(recognize(image)):
        box = (min(line.box[0] for line in group), min(line.box[1] for line in group),
               max(line.box[2] for line in group), max(line.box[3] for line in group))
        bbox = (int(box[0] / scale), int(box[1] / scale), math.ceil(box[2] / scale), math.ceil(box[3] / scale))
        blocks.append(Block(kind="paragraph", text=join_lines([line.text for line in group]),
                            locator=SourceLocator(page=page, bbox=bbox),
                            asset_ids=(asset_key,) if asset_key else ()))
    return blocks


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (0x3000 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF
            or 0xFF00 <= code <= 0xFFEF or 0x20000 <= code <= 0x2FFFF)

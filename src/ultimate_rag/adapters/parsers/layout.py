"""Page layout from a model: a page image in, regions out (kind, box, score).

The model is PaddleOCR's PP-PicoDet layout detector trained on CDLA (``models/layout_cdla.onnx``,
Apache-2.0, see ``models/README.md``), run by onnxruntime on the CPU: ten kinds of region — text,
title, figure, figure caption, table, table caption, header, footer, reference, equation. It costs
a fraction of a second a page (bench/RESULTS.md), so it runs on every page read by OCR
(``ocr_layout.py`` orders the OCR lines by it); born-digital PDF pages may call it too.

The session is created on first use in the process that parses (never in the forkserver:
onnxruntime starts threads) and reused for every page after that.

    regions = detect(page_image)          # PIL image, any mode
    [r for r in regions if r.kind == "title"]
    order = reading_order([r.box for r in regions], page_image.width)   # indexes, columns read in turn
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from .onnx import inference_threads, load_session, memory_errors

if TYPE_CHECKING:
    import onnxruntime

KINDS = ("text", "title", "figure", "figure_caption", "table", "table_caption", "header", "footer",
         "reference", "equation")
Box = tuple[float, float, float, float]  # x0, y0, x1, y1, top-left origin
MODEL = Path(__file__).with_name("models") / "layout_cdla.onnx"
_INPUT = (800, 608)  # height, width the model was exported for
_STRIDES = (8, 16, 32, 64)
_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
_session: onnxruntime.InferenceSession | None = None
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Region:
    """One region of a page: ``kind`` (one of ``KINDS``), ``box`` = (x0, y0, x1, y1) in the
    image's pixels (top-left origin), ``score`` in [0, 1]."""

    kind: str
    box: Box
    score: float

    @property
    def area(self) -> float:
        return max(0.0, self.box[2] - self.box[0]) * max(0.0, self.box[3] - self.box[1])


def detect(image: Image.Image, *, min_score: float = 0.5, iou: float = 0.5) -> list[Region]:
    """The regions the model finds on a page image, at least ``min_score`` sure, overlapping boxes
    of one kind merged (non-maximum suppression at ``iou``), sorted top to bottom."""
    width, height = image.size
    if width < 1 or height < 1:
        return []
    session = _get_session()
    pixels = _preprocess(image)
    outputs = memory_errors(lambda: session.run(None, {session.get_inputs()[0].name: pixels}))
    regions = _decode([np.asarray(o) for o in outputs], min_score, iou)
    sx, sy = width / _INPUT[1], height / _INPUT[0]
    scaled = [Region(r.kind, (max(0.0, r.box[0] * sx), max(0.0, r.box[1] * sy),
                              min(float(width), r.box[2] * sx), min(float(height), r.box[3] * sy)), r.score)
              for r in regions]
    return sorted((r for r in scaled if r.area > 0), key=lambda r: (r.box[1], r.box[0]))


def _get_session() -> onnxruntime.InferenceSession:
    global _session
    with _lock:
        if _session is None:
            _session = load_session(MODEL, inference_threads())
        return _session


def _preprocess(image: Image.Image) -> np.ndarray:
    rgb = image.convert("RGB").resize((_INPUT[1], _INPUT[0]), Image.Resampling.BILINEAR)
    pixels = (np.asarray(rgb, dtype=np.float32) / 255.0 - _MEAN) / _STD
    return np.ascontiguousarray(pixels.transpose(2, 0, 1)[np.newaxis], dtype=np.float32)


def _decode(outputs: list[np.ndarray], min_score: float, iou: float) -> list[Region]:
    """PicoDet's head: per stride, class scores and a distance distribution (reg_max + 1 bins)
    for each side of the box around each cell centre; boxes in the model's input pixels."""
    half = len(outputs) // 2
    boxes: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    for stride, score, distribution in zip(_STRIDES, outputs[:half], outputs[half:], strict=True):
        score, distribution = score[0], distribution[0]
        bins = distribution.shape[-1] // 4
        rows, cols = int(np.ceil(_INPUT[0] / stride)), int(np.ceil(_INPUT[1] / stride))
        ys, xs = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        cx = ((xs.ravel() + 0.5) * stride)[: score.shape[0]]
        cy = ((ys.ravel() + 0.5) * stride)[: score.shape[0]]
        logits = distribution.reshape(-1, bins)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        distance = (weights @ np.arange(bins, dtype=np.float32)).reshape(-1, 4) * stride
        boxes.append(np.stack([cx - distance[:, 0], cy - distance[:, 1], cx + distance[:, 2], cy + distance[:, 3]],
                              axis=1))
        scores.append(score)
    all_boxes, all_scores = np.concatenate(boxes), np.concatenate(scores)
    regions: list[Region] = []
    for index, kind in enumerate(KINDS[: all_scores.shape[1]]):
        mask = all_scores[:, index] > min_score
        for box, value in _nms(all_boxes[mask], all_scores[mask, index], iou):
            regions.append(Region(kind, (float(box[0]), float(box[1]), float(box[2]), float(box[3])), float(value)))
    return regions


def _nms(boxes: np.ndarray, scores: np.ndarray, iou: float, keep: int = 100) -> list[tuple[np.ndarray, float]]:
    order = np.argsort(scores)[::-1][:200]
    picked: list[tuple[np.ndarray, float]] = []
    areas = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    while order.size and len(picked) < keep:
        best, rest = order[0], order[1:]
        picked.append((boxes[best], float(scores[best])))
        x0 = np.maximum(boxes[best, 0], boxes[rest, 0])
        y0 = np.maximum(boxes[best, 1], boxes[rest, 1])
        x1 = np.minimum(boxes[best, 2], boxes[rest, 2])
        y1 = np.minimum(boxes[best, 3], boxes[rest, 3])
        inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
        overlap = inter / (areas[best] + areas[rest] - inter + 1e-5)
        order = rest[overlap <= iou]
    return picked



def reading_order(boxes: list[Box], page_width: float) -> list[int]:
    """The indexes of ``boxes`` in reading order: a box that crosses the page's middle (a title,
    a wide paragraph, a wide figure) ends a band; within a band the left column is read top to
    bottom, then the right one. One or two columns; a third is read with the nearer half."""
    mid = page_width / 2
    margin = 0.05 * page_width
    ordered: list[int] = []
    band: list[int] = []

    def flush() -> None:
        band.sort(key=lambda i: (0 if (boxes[i][0] + boxes[i][2]) / 2 < mid else 1, boxes[i][1], boxes[i][0]))
        ordered.extend(band)
        band.clear()

    for index in sorted(range(len(boxes)), key=lambda i: (round(boxes[i][1], 1), boxes[i][0])):
        x0, _, x1, _ = boxes[index]
        if x0 < mid - margin and x1 > mid + margin:
            flush()
            ordered.append(index)
        else:
            band.append(index)
    flush()
    return ordered

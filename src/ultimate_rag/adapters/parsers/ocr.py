"""Offline OCR with RapidOCR 3 (``rapidocr``, Apache-2.0): PaddleOCR's PP-OCRv6 small detection
and recognition models and the PP-OCR direction classifier, shipped inside the wheel and run by
onnxruntime on the CPU. No download, no network. The recognition model reads Chinese, Japanese
(kana and kanji), English and Latin-script languages with their diacritics (über, cão); it knows
no Hangul, Cyrillic, Arabic or Indic script. Text in such a script is found by the detector but
comes back empty or unsure: a page where most of the text found cannot be read is reported
(``Reading.foreign_script``), its noise never indexed.

The engine is created once per parse process, on first use, and serves every page of the
document: the forkserver only imports the library (onnxruntime starts threads when a session is
created, and a fork after that is unsafe). Engine settings are chosen by measurement
(``bench/ocr_engines.py``, numbers in bench/RESULTS.md).
"""

from __future__ import annotations

import math
import threading
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PIL import Image

from .onnx import inference_threads, memory_errors

if TYPE_CHECKING:
    from rapidocr import RapidOCR

OFF, AUTO, FORCE = "off", "auto", "force"
MODES = (OFF, AUTO, FORCE)
MIN_SCORE = 0.5  # recognised lines less certain than this are not read
SURE_SCORE = 0.9  # on a page mostly in a script the model cannot read, lines less certain are misreadings
READS = "Chinese, Japanese, English and other Latin-script languages"
_engine: RapidOCR | None = None
_engine_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in the image's pixels
    score: float = 1.0

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]

    @property
    def width(self) -> float:
        return self.box[2] - self.box[0]


@dataclass(frozen=True, slots=True)
class Reading:
    """What OCR read on one image: its lines (top to bottom) and how many more text lines the
    detector found that the recogniser could not read (empty, unsure, or punctuation only)."""

    lines: tuple[Line, ...]
    unread: int = 0

    @property
    def foreign_script(self) -> bool:
        """Most of the text found could not be read: a script the model does not know (Korean)."""
        return self.unread >= 2 and self.unread > len(self.lines)


def engine_params(threads: int) -> dict[str, object]:
    """RapidOCR settings (bench/RESULTS.md has the measurements behind each)."""
    return {"Global.log_level": "warning", "Global.text_score": 0.0,  # every line back: unread ones are counted
            # the 180° line classifier flipped upright lines (CER 1–2.5 % with it, 0 % without) and costs time
            "Global.use_cls": False,
            # detection on at most 1280 pixels a side (crops for recognition stay at up to 2000): ~20 % less
            # CPU a page than the default (~1540×2000 for a 200 dpi letter page), same CER, 8 pt text found
            "Det.limit_type": "max", "Det.limit_side_len": 1280,
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1}


def _get_engine() -> RapidOCR:
    global _engine
    with _engine_lock:
        if _engine is None:
            def create() -> RapidOCR:
                from rapidocr import RapidOCR

                return RapidOCR(params=engine_params(inference_threads()))

            _engine = memory_errors(create)
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


def recognize(image: Image.Image) -> Reading:
    """The text lines RapidOCR reads in an RGB image, top to bottom, and the count of lines it
    found but could not read."""
    engine = _get_engine()

    def run() -> tuple[int, list[tuple[list[list[float]], str, float]]]:
        from rapidocr.utils.output import RapidOCROutput

        array = engine.load_img(image)  # a PIL image: converted to the BGR the models expect
        prepared, record = engine.preprocess_img(array)
        det, cls, rec, crops = engine.run_ocr_steps(prepared, record)
        found = 0 if det.boxes is None else len(det.boxes)
        out = engine.build_final_output(array, det, cls, rec, crops, record)
        if not isinstance(out, RapidOCROutput) or out.boxes is None or out.txts is None or out.scores is None:
            return found, []  # nothing found, or nothing read
        return found, [(box.tolist(), str(text), float(score))
                       for box, text, score in zip(out.boxes, out.txts, out.scores, strict=True)]

    found, results = memory_errors(run)
    lines: list[Line] = []
    for points, raw, score in results:
        text = " ".join(raw.split())
        if score < MIN_SCORE or not readable(text):
            continue
        xs = [float(p[0]) for p in points]
        ys = [float(p[1]) for p in points]
        lines.append(Line(text, (min(xs), min(ys), max(xs), max(ys)), score))
    lines.sort(key=lambda line: (line.box[1], line.box[0]))
    reading = Reading(tuple(lines), max(0, found - len(lines)))
    if reading.foreign_script:  # what was read among text that could not be: only what is sure
        sure = tuple(line for line in lines if line.score >= SURE_SCORE)
        reading = Reading(sure, found - len(sure))
    return reading


def foreign_script_warning(pages: str) -> str:
    """What the document says about pages (``"page 2 of 3"``) whose text OCR found but could not read."""
    return (f"{pages}: most of the text is in a script the offline OCR cannot read (it reads {READS}; "
            "Korean, for one, is not among them) and was not indexed; a vision model "
            "(ULTIMATE_RAG_VISION_BASE_URL, ULTIMATE_RAG_VISION_MODEL) can read it from the page image")


def readable(text: str) -> bool:
    """Text with at least one letter or digit (a lone "，" or "|" is a misreading, not text)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def join_lines(texts: list[str]) -> str:
    """Lines of one paragraph as one text: CJK lines join without a space."""
    out = ""
    for text in texts:
        if out and not (is_cjk(out[-1]) and is_cjk(text[0])):
            out += " "
        out += text
    return out


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (0x3000 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF
            or 0xFF00 <= code <= 0xFFEF or 0x20000 <= code <= 0x2FFFF)

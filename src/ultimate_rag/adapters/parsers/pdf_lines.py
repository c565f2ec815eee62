"""Glyphs into lines, the one shape every PDF engine's text takes before layout.

An engine (``pdf_pdfium.py``, ``pdf_mupdf.py``) hands over the glyphs of a page in content order,
each with its box (top-left origin, PDF points), font size and whether a space or a line break
came before it. Lines are built by position, not by the engine's own grouping: a glyph continues
the current line when it overlaps it vertically and does not move back to the left. Inside a
line, a gap of at least ``SPAN_GAP`` font sizes, or a vertical rule between two glyphs, starts a
new span: spans are what table cells and side-by-side columns are made of.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

# (text, x0, y0, x1, y1, size, bold, break before: 0 none, 1 a space, 2 a line break, 3 a space the
# engine inferred from a gap)
Glyph = tuple[str, float, float, float, float, float, bool, int]
Rule = tuple[float, float, float, float]  # x0, y0, x1, y1 of a ruling line (one side is ~0 wide)

SPAN_GAP = 1.0  # font sizes: a wider gap inside a line starts a new span
SCRIPT_GAP = 0.25  # font sizes: a baseline shift closer than this is a superscript or subscript
SPACED_GAP = 1.6  # font sizes: the same where the text has a space there (a CJK space is 1 em wide)
_PRESENTATION = re.compile("[\ufb00-\ufdff\ufe70-\ufefe]")
_NEGATED = re.compile("\u0338\\s?(\\S)")
SPACE = 1
NEWLINE = 2
INFERRED = 3


@dataclass(slots=True)
class Span:
    """Glyphs of one line with no wide gap between them (a cell, a column's part of a line)."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float


@dataclass(slots=True)
class Line:
    x0: float
    y0: float
    x1: float
    y1: float
    spans: list[Span] = field(default_factory=list)
    size: float = 0.0  # the size most of its characters use
    bold: bool = False

    @property
    def text(self) -> str:
        return join_spans([span.text for span in self.spans])

    @property
    def height(self) -> float:
        return self.y1 - self.y0


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0xFF00 <= code <= 0xFFEF


def join_spans(texts: Sequence[str]) -> str:
    """Texts side by side on one line: a space between them, none between CJK characters."""
    if len(texts) == 1:
        return texts[0]
    out = ""
    for text in texts:
        if out and text and not (is_cjk(out[-1]) and is_cjk(text[0])):
            out += " "
        out += text
    return out


def build_lines(glyphs: Sequence[Glyph], rules: Sequence[Rule] = ()) -> list[Line]:
    """The lines of a page in content order (module docstring)."""
    verticals = [r for r in rules if r[2] - r[0] < r[3] - r[1]]
    lines: list[Line] = []
    start = 0
    for k in range(1, len(glyphs)):
        last, glyph = glyphs[k - 1], glyphs[k]
        # _continues, inlined for the common case (a glyph with height): it runs once per glyph
        last_height, height = last[4] - last[2], glyph[4] - glyph[2]
        if last_height < height:
            height = last_height
        if height > 0:
            overlap = (last[4] if last[4] < glyph[4] else glyph[4]) - (last[2] if last[2] > glyph[2] else glyph[2])
            if overlap >= 0.5 * height and (glyph[1] >= last[1] - 0.1 * (glyph[5] if glyph[5] > 1.0 else 1.0)
                                            or _is_rtl(last[0][-1]) or _is_rtl(glyph[0][0])):
                continue
        elif _continues(last, glyph):
            continue
        lines.append(_line(glyphs[start:k], verticals))
        start = k
    if glyphs:
        lines.append(_line(glyphs[start:], verticals))
    return [line for line in lines if line.spans]


def _continues(last: Glyph, glyph: Glyph) -> bool:
    """Whether ``glyph`` sits on the same line as ``last``: vertical overlap of at least half the
    smaller height, and not back to the left of where it starts."""
    overlap = min(last[4], glyph[4]) - max(last[2], glyph[2])
    height = min(last[4] - last[2], glyph[4] - glyph[2])
    if height <= 0:
        return abs(last[4] - glyph[4]) < 0.5 * max(last[5], glyph[5], 1.0) and glyph[1] >= last[1]
    # not back before the start of the glyph before (the second letter of a ligature shares its
    # box), unless the text runs right to left (the engines give Arabic and Hebrew in logical order)
    return overlap >= 0.5 * height and (glyph[1] >= last[1] - 0.1 * max(glyph[5], 1.0)
                                        or _is_rtl(last[0][-1]) or _is_rtl(glyph[0][0]))


def _line(glyphs: Sequence[Glyph], verticals: Sequence[Rule]) -> Line:
    spans: list[Span] = []
    first = glyphs[0]
    middle = (first[2] + first[4]) / 2
    borders = sorted((r[0] + r[2]) / 2 for r in verticals if r[1] <= middle <= r[3])
    begin = 0  # where the current span starts in ``glyphs``
    parts: list[str] = [first[0]]
    prev = first
    for k in range(1, len(glyphs)):
        glyph = glyphs[k]
        text, gx0, _, gx1, _, size, _, brk = glyph
        gap = gx0 - prev[3] if gx0 - prev[3] > prev[1] - gx1 else prev[1] - gx1  # either way round
        em = size if size > prev[5] else prev[5]
        if em < 1.0:
            em = 1.0
        if gap >= (SPACED_GAP if brk == SPACE else SPAN_GAP) * em or (
                borders and gap > 0.1 * size and _ruled_between(prev[3], gx0, borders)):
            spans.append(_span(glyphs[begin:k], parts))
            begin, parts = k, []
        elif brk:
            if brk == SPACE or (brk == INFERRED and not (is_cjk(prev[0][-1]) and is_cjk(text[0]))) or (
                    brk == NEWLINE and gap > SCRIPT_GAP * size):
                # a space in the text; one the engine inferred from a gap, except inside CJK text; a
                # "line break" on the same line is a superscript or subscript, glued unless apart
                parts.append(" ")
        elif (ord(text[0]) >= 0x600 or ord(prev[0][-1]) >= 0x600) and _glued(prev[0][-1], text[0]):
            parts.append(" ")
        parts.append(text)
        prev = glyph
    spans.append(_span(glyphs[begin:], parts))
    spans = [span for span in spans if span.text]
    if not spans:
        return Line(first[1], first[2], first[3], first[4])
    total: Counter[float] = Counter()
    for span in spans:
        total[span.size] += len(span.text)
    bold = sum(len(g[0]) for g in glyphs if g[6])
    return Line(min(s.x0 for s in spans), min(s.y0 for s in spans), max(s.x1 for s in spans),
                max(s.y1 for s in spans), spans, _common(total), bold * 2 > sum(len(s.text) for s in spans))


def _span(glyphs: Sequence[Glyph], parts: list[str]) -> Span:
    sizes = Counter([glyph[5] for glyph in glyphs])
    return Span(min([g[1] for g in glyphs]), min([g[2] for g in glyphs]), max([g[3] for g in glyphs]),
                max([g[4] for g in glyphs]), _normal_forms("".join(parts).strip()), round(_common(sizes), 1))


def _normal_forms(text: str) -> str:
    """Presentation forms as the letters they show (NFKC): Arabic contextual forms (U+FE70–FEFF,
    U+FB50–FDFF), Hebrew and Latin ligatures (U+FB00–FB4F). PDFs of right-to-left text often
    carry them, and a search for the ordinary letters must find them. TeX's negation slash, drawn
    before the sign it crosses (tex_math_fonts.py), is composed with it: ≠, ∉, ⊈."""
    if "\u0338" in text:
        text = _NEGATED.sub(lambda m: unicodedata.normalize("NFC", m.group(1) + "\u0338"), text)
    return unicodedata.normalize("NFKC", text) if _PRESENTATION.search(text) else text


def _glued(before: str, after: str) -> bool:
    """Arabic letters and digits set without a space between them are two words (a number after an
    Arabic word comes out glued to it when the text is reordered)."""
    return (_is_arabic(before) and after.isdigit()) or (before.isdigit() and _is_arabic(after))


def _is_rtl(ch: str) -> bool:
    return "\u0590" <= ch <= "\u08ff" or "\ufb1d" <= ch <= "\ufdff" or "\ufe70" <= ch <= "\ufefe"


def _is_arabic(ch: str) -> bool:
    return ch.isalpha() and ("\u0600" <= ch <= "\u06ff" or "\u0750" <= ch <= "\u077f" or "\u08a0" <= ch <= "\u08ff")


def _common(sizes: Counter[float]) -> float:
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _ruled_between(left: float, right: float, borders: list[float]) -> bool:
    """Whether a vertical rule (``borders``: their x, sorted) runs between two neighbouring glyphs."""
    k = bisect_left(borders, left - 1.0)
    return k < len(borders) and borders[k] <= right + 1.0

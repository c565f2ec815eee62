"""The built-in encodings of TeX's math fonts, for PDFs that embed them without a Unicode map.

pdfTeX embeds Computer Modern's math fonts (CMSY symbols, CMMI math italic, CMEX extension) as
Type 1 fonts with their own built-in encodings and, often, no ``/ToUnicode``. PDFium maps a glyph
through its name where the name is a standard one and otherwise hands over the raw code: the
prime ′ comes out as ``0``, ϱ as ``%``, ⟨ ⟩ as ``h i``, ‖ as ``k``, big delimiters as control
characters. MuPDF and pypdf read the glyph names; PDFium's API gives none. So the raw codes are
mapped back here by the font's name, only where the code cannot be a correct mapping: a code the
font has no such character for (CMSY has no digits or small letters, CMMI no ``%``, CMEX no
control characters). Names are matched without the subset prefix and the design size
(``ABCDEF+CMSY10`` → ``CMSY``); the bold variants share the encodings.
"""

from __future__ import annotations

import re

_DELIMITERS = "([]⌊⌋⌈⌉{}⟨⟩|‖/\\"
_CMSY_LOW = "−·×∗÷⋄±∓⊕⊖⊗⊘⊙◯∘•≍≡⊆⊇≤≥⪯⪰∼≈⊂⊃≪≫≺≻"  # 0x00-0x1F
_CMSY_DIGITS = "′∞∈∋△▽\u0338↦∀∃"  # 0x30-0x39 (0x36: the negation slash, drawn over the next sign)
_CMSY_LETTERS = "⊢⊣⌊⌋⌈⌉{}⟨⟩|‖↕⇕\\≀√⨿∇∫⊔⊓⊑⊒§†‡"  # 0x60-0x7A
_CMMI_GREEK = "ΓΔΘΛΞΠΣΥΦΨΩαβγδϵζηθικλμνξπρστυφχψωεϑϖϱςϕ"  # 0x00-0x27
_CMEX_BIG = "()[]⌊⌋⌈⌉{}⟨⟩|‖/\\()()[]⌊⌋⌈⌉{}⟨⟩/\\()[]⌊⌋⌈⌉{}⟨⟩/\\/\\"  # 0x00-0x2F, sizes aside
_CMEX_OPERATORS = "∑∏∫⋃⋂⊎∧∨∑∏∫⋃⋂⊎∧∨"  # 0x50-0x5F: text and display sizes
_LINE_CODES = (9, 10, 13)  # tab and line breaks: PDFium reports its own, never mapped


def _table(start: int, chars: str) -> dict[int, str]:
    return {start + k: ch for k, ch in enumerate(chars) if start + k not in _LINE_CODES}


_TABLES: dict[str, dict[int, str]] = {
    "CMSY": {**_table(0x00, _CMSY_LOW), **_table(0x30, _CMSY_DIGITS), **_table(0x60, _CMSY_LETTERS)},
    "CMMI": {k: v for k, v in _table(0x00, _CMMI_GREEK).items() if k != 0x20},  # 0x20 ψ: a space to PDFium
    "CMEX": {**_table(0x00, _CMEX_BIG), **_table(0x50, _CMEX_OPERATORS)},
}
_FAMILY = re.compile(r"^(?:[A-Z]{6}\+)?(CMB?SY|CMMIB?|CMEX)\d*$")
# The codes worth a look at the font: those PDFium was seen to hand over raw (its glyph-name list
# maps the others, ∈ ∀ { | √ ∇ ...), and none of the common small letters, which would cost two
# calls each on every page that shows a formula: control characters, the digits 0 3–7 (′ ∋ △ ▽ ̸ ↦),
# h i k (⟨ ⟩ ‖), ! to ' (CMMI's ω ε ϑ ϖ ϱ ς ϕ), and CMEX's big delimiters and operators.
SUSPECT = frozenset([*range(0x00, 0x20), 0x30, *range(0x33, 0x38), 0x68, 0x69, 0x6B, *range(0x21, 0x30),
                     *range(0x50, 0x60)]) - frozenset(_LINE_CODES)


def math_table(font_name: str) -> dict[int, str] | None:
    """The code → character table for a TeX math font's name, or None for any other font."""
    found = _FAMILY.match(font_name)
    if found is None:
        return None
    family = found.group(1).replace("CMBSY", "CMSY").replace("CMMIB", "CMMI")
    return _TABLES[family]

"""Is an extracted text layer readable? The rule, for every parser that extracts text from glyphs.

A PDF whose fonts have no Unicode map (no ToUnicode table, a custom encoding) still yields
"text": the glyph codes themselves, which come out as C0 control characters, private-use or
replacement characters, or letters shifted by a constant (pymupdf's 001003ED.pdf: "Die Redaktion
von" reads "$IE\\x002EDAKTION\\x00VON", every space shifted down to NUL). Real text has next to
none of these characters, so their share is the signal:

- a text is unreadable when at least ``GARBAGE_SHARE`` (10 %) of its non-blank characters, and at
  least two of them, are garbage: controls other than tab/newline/CR, private-use (unless it stands
  alone, like a symbol-font bullet), unassigned, surrogates, noncharacters or U+FFFD. Text
  shifted down like 001003ED.pdf's trips it, because its spaces and punctuation land in the
  control range; a shift that stays among letters does not (a known limit, docs/formats.md);
- a page is unreadable when unreadable texts hold at least half of its characters.

A second shape: codes that land on printable ASCII punctuation (``is_symbol_soup``: no letter,
mostly ``!"#$%…``), as a subset font whose codes were given out from ``!`` upwards gives them.

A single stray control character in a paragraph is not garbage; it is removed (sanitize.py).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

GARBAGE_SHARE = 0.10
PAGE_SHARE = 0.5
UNREADABLE_REASON = "the PDF's text layer cannot be read (its fonts have no Unicode map); it needs OCR"
_GARBAGE_CATEGORIES = frozenset({"Cc", "Co", "Cn", "Cs"})
SOUP_MIN = 4
SOUP_SHARE = 0.6
_ASCII_SYMBOLS = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def garbage_count(text: str) -> tuple[int, int]:
    """(garbage characters, non-blank characters) of ``text``. A private-use character standing
    alone between blanks is a symbol-font bullet or icon (U+F0B7 from Word/PowerPoint), not garbage."""
    if text.isprintable() and "\ufffd" not in text:  # no control, private-use or unassigned character
        return 0, len(text) - text.count(" ")
    garbage = total = 0
    last = len(text) - 1
    for i, ch in enumerate(text):
        if ch in " \t\n\r":
            continue
        total += 1
        category = unicodedata.category(ch)
        if ch == "\ufffd" or category in _GARBAGE_CATEGORIES:
            if category == "Co" and (i == 0 or text[i - 1].isspace()) and (i == last or text[i + 1].isspace()):
                continue
            garbage += 1
    return garbage, total


def is_unreadable(text: str) -> bool:
    garbage, total = garbage_count(text)
    return (garbage >= 2 and garbage >= GARBAGE_SHARE * total) or is_symbol_soup(text)


def is_symbol_soup(text: str) -> bool:
    """Glyph codes that landed on printable ASCII: a font without a Unicode map whose codes were
    given out from ``!`` upwards (OCRmyPDF's truetype_font_nomapping.pdf reads ``"7+%-``). At
    least ``SOUP_MIN`` characters, no letter at all, and ASCII punctuation and symbols make
    ``SOUP_SHARE`` of them or more; numbers and formulas ("[0, 1] × [0, 1]", "330,435.30") do not."""
    if len(text) < SOUP_MIN or any(ch.isalpha() for ch in text):
        return False
    chars = [ch for ch in text if not ch.isspace()]
    if len(chars) < SOUP_MIN:
        return False
    paired = chars.count("(") == chars.count(")") and chars.count("[") == chars.count("]")
    if paired and any(ch in "([" for ch in chars):
        return False  # brackets that pair up: a formula, "(1) - (2) = 3%"
    return sum(ch in _ASCII_SYMBOLS for ch in chars) >= SOUP_SHARE * len(chars)


def page_is_unreadable(texts: Sequence[str]) -> bool:
    """Whether the unreadable texts of one page hold at least half of its characters."""
    bad = sum(len(t) for t in texts if is_unreadable(t))
    return bad > 0 and bad >= PAGE_SHARE * sum(len(t) for t in texts)


def page_ranges(pages: Sequence[int]) -> str:
    """[2, 3, 4, 7] -> "2–4, 7"."""
    runs: list[list[int]] = []
    for number in sorted(set(pages)):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)


def unreadable_warnings(unreadable_pages: Sequence[int], partly: Sequence[int], page_count: int) -> list[str]:
    """User-facing warnings for a document indexed without some of its text."""
    warnings = []
    if unreadable_pages:
        which = "page" if len(unreadable_pages) == 1 else "pages"
        warnings.append(
            f"{which} {page_ranges(unreadable_pages)} of {page_count}: the text layer cannot be read "
            "(its fonts have no Unicode map) and was not indexed; those pages need OCR")
    if partly:
        which = "page" if len(partly) == 1 else "pages"
        warnings.append(f"some text on {which} {page_ranges(partly)} cannot be read (a font without a "
                        "Unicode map) and was not indexed")
    return warnings

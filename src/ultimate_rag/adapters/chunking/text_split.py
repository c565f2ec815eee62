"""Text splitting helpers for the chunker: sentences, hard splits, code fences and table headers."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

# A sentence ends at English terminal punctuation followed by whitespace, at CJK terminal
# punctuation (no space needed), or at a line break. Closing quotes/brackets stay with it.
_BOUNDARY = re.compile(
    r"[.!?…]+[\"'”’)\]]*\s+"
    r"|[。！？；]+[」』”’\"'）)\]]*\s*"
    r"|\n\s*"
)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_GLUE = frozenset("\u200d\ufe0e\ufe0f")


def split_sentences(text: str) -> list[tuple[str, str, int]]:
    """Split into (sentence, whitespace that followed it, start offset in text).

    Sentences are non-empty and trimmed; sentence + gap pieces rebuild the trimmed text.
    """
    out: list[tuple[str, str, int]] = []
    pos = len(text) - len(text.lstrip())
    for match in _BOUNDARY.finditer(text, pos):
        _append(out, text, pos, match.end())
        pos = match.end()
    _append(out, text, pos, len(text))
    return out


def _append(out: list[tuple[str, str, int]], text: str, start: int, end: int) -> None:
    segment = text[start:end]
    body = segment.rstrip()
    gap = segment[len(body):]
    if body:
        out.append((body, gap, start))
    elif out and gap:
        out[-1] = (out[-1][0], out[-1][1] + gap, out[-1][2])


def hard_split(text: str, measure: Callable[[str], int], limit: int,
               guess: int) -> list[tuple[str, str, int, int]]:
    """Cut text into (piece, gap, measure(piece), start offset) with measure(piece) <= limit.

    Each cut is found by a safeguarded interpolation search on the character length (token
    counts grow almost linearly with length), starting from ``guess`` characters and then from
    the previous piece's length, so a piece costs a handful of tokenizer calls on short strings.
    Cuts prefer whitespace in the second half of a piece and never separate a surrogate pair
    or a combining mark from its base character.
    """
    out: list[tuple[str, str, int, int]] = []
    lead = len(text) - len(text.lstrip())
    rest = text.strip()
    base = measure("")
    while rest:
        lo, lo_n = _longest_fit(rest, measure, limit, guess, base)
        if lo == len(rest):
            out.append((rest, "", lo_n, lead))
            break
        cut, n = _choose_cut(rest, lo, lo_n, measure, limit)
        piece, remainder = rest[:cut].rstrip(), rest[cut:]
        if len(piece) != cut:
            n = measure(piece)
        stripped = remainder.lstrip()
        gap = remainder[:len(remainder) - len(stripped)]
        out.append((piece, gap, n, lead))
        lead += cut + len(gap)
        rest = stripped
        guess = max(1, lo)
    return out


def _longest_fit(rest: str, measure: Callable[[str], int], limit: int, guess: int,
                 base: int) -> tuple[int, int]:
    """(length, tokens) of a prefix that fits and is within ~2% of the longest that does."""
    lo, lo_n = 0, base
    hi, hi_n = len(rest) + 1, -1
    probe = max(1, min(len(rest), guess))
    step = 0
    while True:
        n = measure(rest[:probe])
        if n <= limit:
            lo, lo_n = probe, n
        else:
            hi, hi_n = probe, n
        if lo == len(rest) or hi - lo <= max(1, lo // 64):
            return lo, lo_n
        step += 1
        if hi_n < 0:  # no upper bound yet: extrapolate from the density seen so far
            per_char = (lo_n - base) / lo if lo_n > base else 0.0
            probe = lo + int((limit - lo_n) / per_char) + 1 if per_char else lo * 2
        elif step % 3 == 0:  # plain bisection now and then keeps the worst case logarithmic
            probe = (lo + hi) // 2
        else:
            probe = lo + int((limit - lo_n) * (hi - lo) / max(1, hi_n - lo_n))
        probe = min(max(probe, lo + 1), hi - 1, len(rest))


def _choose_cut(rest: str, lo: int, lo_n: int, measure: Callable[[str], int], limit: int) -> tuple[int, int]:
    if lo == 0:  # not even one character fits: take the smallest unsplittable unit anyway
        cut = 1
        while cut < len(rest) and _inseparable(rest, cut):
            cut += 1
        return cut, measure(rest[:cut])
    safe = lo
    while safe > 1 and _inseparable(rest, safe):
        safe -= 1
    candidates = []
    space = _last_space(rest, safe // 2, safe)
    if space > 0:
        candidates.append(space)
    candidates.append(safe)
    for cut in candidates:
        if cut == lo:
            return lo, lo_n
        n = measure(rest[:cut].rstrip())
        if n <= limit:
            return cut, n
    return lo, lo_n


def _last_space(text: str, start: int, end: int) -> int:
    for i in range(end - 1, start - 1, -1):
        if text[i].isspace():
            return i
    return -1


def _inseparable(text: str, i: int) -> bool:
    """True when cutting before text[i] would break a character apart."""
    ch = text[i]
    if "\udc00" <= ch <= "\udfff" and "\ud800" <= text[i - 1] <= "\udbff":
        return True
    return ch in _GLUE or unicodedata.category(ch).startswith("M")


def code_wrapper(text: str) -> tuple[list[str], list[str], list[str]]:
    """(opening lines, body lines, closing lines) of a code block; parts of a split fenced block
    are each re-fenced, so every chunk still shows code with its language."""
    lines = text.split("\n")
    match = _FENCE.match(lines[0])
    if match is None:
        return [], lines, []
    fence = match.group(1)
    last = lines[-1].strip() if len(lines) > 1 else ""
    if len(lines) > 1 and last.startswith(fence) and not last.strip(fence[0]):
        return [lines[0]], lines[1:-1], [lines[-1]]
    return [lines[0]], lines[1:], [fence]


def table_header(lines: list[str]) -> int:
    """Number of header lines (header row plus delimiter row) of a pipe table."""
    if len(lines) >= 2 and _TABLE_DELIMITER.match(lines[1]) and "-" in lines[1]:
        return 2
    return 1 if lines else 0

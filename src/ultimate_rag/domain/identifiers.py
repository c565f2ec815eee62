"""Identifiers in text (SPEC §10; docs/search.md "Identifiers"): error codes, tickets, part, order,
clause and version numbers. A query naming one ranks the chunks holding that exact identifier first;
each chunk's identifiers are kept beside it in PostgreSQL (``chunks.identifiers``, a GIN index).

What counts as one. Text is folded first: NFKC (full-width forms), case-folded, every hyphen and
dash variant (U+2010-U+2015, U+2212, ...) a plain ``-``. A token is a run of Latin, Greek or
Cyrillic letters and digits, joined by ``- _ . / : #``; any other character (Chinese, Korean,
Japanese, spaces, punctuation) ends it, so ``SR-88346是什么问题`` holds ``SR-88346``. A token is an
identifier when it holds a digit and a letter (``E1234``, ``v2.14.1``; in a query not a quantity,
digits then letters without a separator: ``1st``, ``100ms``, ``4K``), or digits with a separator
(``7.3.2``, ``2024-01-15``), or is a number of five digits or more (``88346``). An upper-case code
(``GB/T``, ``ISO``, ``SR``) followed by one space and a number is one identifier: ``GB/T 7714``.

Spellings people mix up are one key: a ``-``, ``_`` or space between a letter and a digit is
dropped (``SR-88346`` = ``SR 88346`` = ``sr88346``); between digits every separator stays
(``7.3.2`` is not ``73.2``). Keys are whole: ``88346`` never matches ``88364``, ``SR-8834`` never
``SR-88346``.

Partial identifiers. A chunk is also indexed under the parts of its identifiers that are
identifiers themselves: every prefix ending at a separator (``GB/T 7714-2015`` is found by
``GB/T 7714``, ``7.3.2`` by ``7.3``, ``v2.14.1`` by ``v2``), whatever follows a ``/``, ``:`` or
``#`` (``docs/SR-88346.md`` is found by ``SR-88346``), the number after a letter prefix (``v2.14.1``
by ``2.14.1``, ``SR-88346`` by ``88346``) and any number of five digits or more. Never the other
way: a query's identifier must be whole in the chunk (``7.3.2`` does not find a chunk saying only
``7.3``), and no part starts after a ``.`` or ``-`` between digits (``3.2`` does not find ``7.3.2``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from uuid import UUID

MAX_KEY_CHARS = 64  # longer runs are hashes of whole files, base64, URLs: not typed by anyone
MAX_SEGMENTS = 16  # parts are taken from the first 16 segments of a token (a path's or an IP's)
MAX_QUERY_IDENTIFIERS = 16
MAX_TOKEN_CHARS = 256  # a longer run of letters, digits and separators is data, not something typed
MIN_BARE_DIGITS = 5  # a bare number this long is an identifier (a ticket, an order); shorter ones are counts, years

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d"), "-")
_DASHES[0x00AD] = ""  # a soft hyphen is invisible: gone
_LETTER = "a-z\u00df-\u00f6\u00f8-\u024f\u0370-\u03ff\u0400-\u04ff"
_W = f"0-9{_LETTER}"
# a token holding a digit: segments of letters and digits joined by separators, from a token's start
_DIGIT_TOKEN = re.compile(rf"(?<![{_W}\-_./:#])#?(?:[{_W}]+[-_./:#])*[{_W}]*[0-9][{_W}]*(?:[-_./:#][{_W}]+)*")
_SEGMENT = re.compile(rf"[0-9{_LETTER}]+")
_SPLIT = re.compile(r"(?<=[^\W\d_])[-_ ](?=\d)|(?<=\d)[-_ ](?=[^\W\d_])")  # letter-digit joints: dropped
_QUANTITY = re.compile(rf"[0-9]+[{_LETTER}]+")
_DIGIT = re.compile("[0-9]")
_LETTERS = re.compile(f"[{_LETTER}]")
_CODE = re.compile(rf"#?[{_LETTER}]+(?:[-_./:#][{_LETTER}]+)*")  # a standard's or a ticket kind's prefix
_CODE_BEFORE = re.compile(rf"(?<![{_W}\-_./:#])#?[{_LETTER}]+(?:[-_./:#][{_LETTER}]+)*$")
_PART_STARTS = "/:#"


@lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    return unicodedata.normalize("NFKC", ch).casefold().translate(_DASHES)


def fold(text: str) -> tuple[str, list[int]]:
    """``text`` folded (NFKC, case, dashes), and for each folded character the index of the
    character of ``text`` it came from (highlights map back through it)."""
    if text.isascii():
        return text.lower(), list(range(len(text)))
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        folded = _fold_char(ch)
        out.append(folded)
        origin.extend([i] * len(folded))
    return "".join(out), origin


@dataclass(frozen=True, slots=True)
class Occurrence:
    """An identifier found in text: its key (what is matched) and where it is in the text
    (``[start, end)`` character offsets of the original text)."""

    key: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class QueryIdentifier:
    """An identifier as the query wrote it (reported back when nothing holds it) and its key."""

    text: str
    key: str


def _key(raw: str) -> str:
    return _SPLIT.sub("", raw)


def _qualifies(key: str, raw: str, *, query: bool) -> bool:
    """Whether a (folded) token is an identifier; ``raw`` is how it was written (separators in).
    A quantity (``1st``, ``100ms``, ``4k``) is one in a chunk, so that ``1234-A`` finds ``1234A``,
    but a query naming one asks for nothing exact."""
    if not 2 <= len(key) <= MAX_KEY_CHARS or not any(c.isdigit() for c in key):
        return False
    if _LETTERS.search(key):
        return not query or _QUANTITY.fullmatch(raw) is None
    if key.isdigit():
        return len(key) >= MIN_BARE_DIGITS
    return True  # digits with a separator: 7.3.2, 2024-01-15, #1234


def _tokens(folded: str, origin: list[int], text: str) -> Iterator[tuple[int, int]]:
    """Spans of the tokens of ``folded`` that hold a digit (nothing else can be an identifier), an
    upper-case code just before one (one space between) joined to it."""
    for match in _DIGIT_TOKEN.finditer(folded):
        start, end = match.span()
        if end - start > MAX_TOKEN_CHARS:
            continue
        if start >= 2 and folded[start - 1] == " " and folded[start].isdigit():
            code = _CODE_BEFORE.search(folded, max(0, start - 1 - MAX_KEY_CHARS), start - 1)
            if code is not None and _is_code(code[0], text[origin[code.start()]:origin[start - 2] + 1]):
                start = code.start()
        yield start, end


def _is_code(folded: str, written: str) -> bool:
    """``GB/T``, ``ISO``, ``SR``: letters only, and written in capitals or with a ``/ : #``."""
    return (_CODE.fullmatch(folded) is not None and len(folded.strip("#")) >= 2
            and (any(c in folded for c in _PART_STARTS) or written.isupper()))


def _parts(raw: str) -> Iterator[tuple[int, int]]:
    """Spans (in ``raw``) of the parts a chunk is also found by (module docstring): each run of
    segments from a start to a segment's end. Starts: the token's, after a ``/ : #`` (and at a
    ``#``), at the number after letters (``v2``, ``sr-88346``), at a number of five digits or more."""
    segments = [m.span() for m in _SEGMENT.finditer(raw)][:MAX_SEGMENTS]
    starts: list[int] = [0]
    for k, (s, e) in enumerate(segments):
        joint = raw[segments[k - 1][1]:s] if k else ""
        if joint in ("/", ":", "#"):
            starts.append(s - 1 if joint == "#" else s)
            starts.append(s)
        first_digit = next((i for i, c in enumerate(raw[s:e]) if c.isdigit()), None)
        if first_digit and raw[s:s + first_digit].isalpha():  # v2, sr88346: the number too
            starts.append(s + first_digit)
        elif first_digit == 0 and k and joint in ("-", "_", " ") and raw[s - len(joint) - 1].isalpha():
            starts.append(s)  # sr-88346, gb/t 7714: the number after the letters
        if e - s >= MIN_BARE_DIGITS and raw[s:e].isdigit():
            starts.append(s)
    for start in dict.fromkeys(starts):
        for _, end in segments:
            if end > start:
                yield start, end


@lru_cache(maxsize=8192)
def _pieces(raw: str, parts: bool) -> tuple[tuple[int, int, str], ...]:
    """The identifiers of one folded token, ``(start, end, key)`` in it (a token recurs: memoized)."""
    spans = _parts(raw) if parts else ((0, len(raw)),)
    keyed = ((s, e, _key(raw[s:e])) for s, e in spans)
    return tuple((s, e, key) for s, e, key in keyed if _qualifies(key, raw[s:e], query=not parts))


def occurrences(text: str, *, parts: bool = True) -> list[Occurrence]:
    """Every identifier in ``text`` with its place; ``parts``: with the parts a chunk is also
    found by (a query's identifiers are taken whole)."""
    folded, origin = fold(text)
    return [Occurrence(key, origin[start + s], origin[start + e - 1] + 1)
            for start, end in _tokens(folded, origin, text) for s, e, key in _pieces(folded[start:end], parts)]


def identifier_keys(text: str) -> list[str]:
    """The keys a chunk holding ``text`` is indexed under (its identifiers and their parts), each once."""
    return sorted({o.key for o in occurrences(text)})


def query_identifiers(query: str) -> list[QueryIdentifier]:
    """The identifiers a query names, whole, each key once, in order (at most 16)."""
    seen: dict[str, QueryIdentifier] = {}
    for o in occurrences(query, parts=False):
        seen.setdefault(o.key, QueryIdentifier(query[o.start:o.end], o.key))
    return list(seen.values())[:MAX_QUERY_IDENTIFIERS]


def spans_of(text: str, keys: Iterable[str]) -> list[tuple[int, int]]:
    """``[start, end)`` offsets in ``text`` of its identifiers (or parts) whose key is one of ``keys``."""
    wanted = set(keys)
    if not wanted:
        return []
    return [(o.start, o.end) for o in occurrences(text) if o.key in wanted]


def chunk_identifiers(content: str, heading_path: Sequence[str] = ()) -> list[str]:
    """The keys a chunk is indexed under: those of its content and of its headings (a chunk under
    "SR-88346" is about that ticket even where its text does not repeat the number)."""
    return identifier_keys("\n".join([*heading_path, content]))


# --- the identifier tier of a search ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdentifierHits:
    """What the identifier index says about a query's keys: those some searchable chunk (under the
    search's filters) holds, and chunks holding them with the keys each holds (at most a limit a key)."""

    found: frozenset[str] = frozenset()
    chunks: Mapping[UUID, frozenset[str]] = field(default_factory=dict)


def identifier_tier(ranked: Sequence[tuple[UUID, float]],
                    matched: Mapping[UUID, int]) -> list[tuple[UUID, float]]:
    """The identifier stage of a search: chunks holding more of the query's identifiers first,
    the fused order kept within each tier (a stable sort); nothing moves when no chunk holds one."""
    if not any(matched.values()):
        return list(ranked)
    return sorted(ranked, key=lambda pair: -matched.get(pair[0], 0))

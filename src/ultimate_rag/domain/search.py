"""What a search asks for (SPEC §10) and the pure parts of answering it: filters, score fusion and
the highlight rule. No I/O here; the adapters turn ``SearchFilters`` into their own query language.

Fusion (chosen by measurement across several sets, docs/search.md and bench/retrieval.py --public):
a chunk's score is ``w * dense + (1 - w) * sparse + lexical_weight * bm25``, the similarities of the
same chunk, so the gap between two close candidates survives (rank fusion would keep only their
order).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from .lexical import LexicalQuery
from .metadata_filter import MetadataFilter


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    DENSE = "dense"
    SPARSE = "sparse"


class Fusion(StrEnum):
    WEIGHTED = "weighted"
    RRF = "rrf"


RRF_K = 60


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """All optional, combined with AND. ``filename`` is a glob (``*``, ``?``, ``[...]``), matched
    against the whole file name, case-sensitive; ``heading`` is text contained in the heading path
    (case-insensitive)."""

    document_ids: tuple[UUID, ...] | None = None
    filename: str | None = None
    mime_types: tuple[str, ...] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    connector_id: UUID | None = None
    heading: str | None = None
    metadata: MetadataFilter | None = None  # the documents' own fields (domain/metadata_filter.py)

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in self.__dataclass_fields__)

    @property
    def document_level(self) -> bool:
        """Anything besides ``heading`` (which is per chunk) restricts whole documents."""
        return any(getattr(self, name) is not None for name in self.__dataclass_fields__ if name != "heading")


@dataclass(frozen=True, slots=True)
class QueryVectors:
    """The query as the index sees it: the dense vector, the learned sparse one (index -> weight)
    and its BM25 terms (None: no query term is in the knowledge base, or a dense search)."""

    dense: tuple[float, ...]
    sparse: Mapping[int, float] = field(default_factory=dict)
    lexical: LexicalQuery | None = None


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    """A candidate with its similarities: dense and learned sparse (cosine; 0.0 where the chunk has
    no sparse vector) and BM25 (normalised by the query's total IDF, domain/lexical.py; 0.0 without)."""

    chunk_id: UUID
    dense: float
    sparse: float
    lexical: float = 0.0


MAX_GLOB_STARS = 16  # `*` left after runs are collapsed; each is a `.*` the regex engine must try
MAX_GLOB_SINGLES = 32  # `?` and `[...]`: each is a position the engine tracks in every name


def glob_to_regex(pattern: str) -> str:
    """A filename glob as an anchored PostgreSQL regular expression (``~``): ``*`` any run of
    characters, ``?`` one character, ``[...]`` / ``[!...]`` one of (or none of) a set, where ``a-z``
    is a range; every other character, inside a set or not, is matched literally (escaped).

    Bounded (``ValueError`` beyond): a run of ``*`` and ``?`` becomes its ``?`` followed by one
    ``*`` (``**?*`` is ``?*``), and at most ``MAX_GLOB_STARS`` stars and ``MAX_GLOB_SINGLES``
    one-character wildcards are allowed. 255 stars in a row cost the database seconds per search
    over a few thousand names, and so did 250 ``?``; within these bounds the worst costs a few
    hundredths of a second (bench/search_bounds.py)."""
    out, i, stars, singles = ["^"], 0, 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch in "*?":
            end = i
            while end < len(pattern) and pattern[end] in "*?":
                end += 1
            run = pattern[i:end]
            out.append("." * run.count("?"))
            singles += run.count("?")
            if "*" in run:
                out.append(".*")
                stars += 1
            i = end
            continue
        if ch == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1:end]
            negate = body.startswith("!")
            out.append("[" + ("^" if negate else "") + _glob_set(body[1:] if negate else body) + "]")
            singles += 1
            i = end + 1
            continue
        out.append(_literal(ch))
        i += 1
    if stars > MAX_GLOB_STARS:
        raise ValueError(f"the file name pattern has {stars} wildcards '*' (at most {MAX_GLOB_STARS})")
    if singles > MAX_GLOB_SINGLES:
        raise ValueError(f"the file name pattern has {singles} wildcards '?' and '[...]' (at most {MAX_GLOB_SINGLES})")
    out.append("$")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class FusionWeights:
    """Weighted fusion: ``dense`` and ``sparse`` share the similarity (``sparse`` = 1 - ``dense``);
    ``lexical`` adds the BM25 score on top (chosen across several sets: bench/RESULTS.md)."""

    dense: float = 0.6
    lexical: float = 0.2

    @property
    def sparse(self) -> float:
        return 1.0 - self.dense

    def multilingual(self) -> FusionWeights:
        """The weights in a knowledge base where language centring applies: BM25 is evidence within
        the question's own language only, so there it weighs ``MULTILINGUAL_LEXICAL`` of its weight
        (measured: at full weight it costs cross-language questions what it gains on keywords;
        bench/RESULTS.md)."""
        return replace(self, lexical=self.lexical * MULTILINGUAL_LEXICAL)


MULTILINGUAL_LEXICAL = 0.25


def _glob_set(body: str) -> str:
    """The inside of a ``[...]`` set: ranges ``a-z`` kept, every other character escaped (so ``^``,
    ``[``, ``\\`` and ``[:alpha:]`` are just characters)."""
    out, i = [], 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-" and body[i] <= body[i + 2]:
            out.append(f"{_literal(body[i])}-{_literal(body[i + 2])}")
            i += 3
        else:
            out.append(_literal(body[i]))
            i += 1
    return "".join(out)


def _literal(ch: str) -> str:
    """One character matched as itself in an ARE: letters, digits and ``_`` need no escape (an
    escaped letter would be a class such as ``\\d``); everything else gets a backslash."""
    return ch if ch.isalnum() or ch == "_" else "\\" + ch


def fuse(candidates: Iterable[ScoredChunk], mode: SearchMode, *, fusion: Fusion = Fusion.WEIGHTED,
         weights: FusionWeights | None = None) -> list[tuple[UUID, float]]:
    """(chunk id, score) best first. ``dense`` mode: the dense similarity alone; ``sparse``: the
    lexical side, learned sparse and BM25 (the hybrid score without its dense part, divided by the
    sparse weight: on the sparse similarity's scale); ``hybrid``: all three."""
    items = list(candidates)
    weights = weights or FusionWeights()
    if mode is SearchMode.DENSE:
        scored = [(c.chunk_id, c.dense) for c in items]
    elif fusion is Fusion.RRF:
        total = dict.fromkeys((c.chunk_id for c in items), 0.0)
        ranks = [sorted((c for c in items if c.sparse), key=lambda c: -c.sparse),  # nothing on a side: no rank there
                 sorted((c for c in items if c.lexical > 0), key=lambda c: -c.lexical)]
        if mode is SearchMode.HYBRID:
            ranks.append(sorted(items, key=lambda c: -c.dense))
        for ranked in ranks:
            for rank, c in enumerate(ranked, 1):
                total[c.chunk_id] += 1 / (RRF_K + rank)
        scored = list(total.items())
    elif mode is SearchMode.SPARSE:  # the hybrid score's lexical side, on the learned sparse similarity's scale
        lexical = weights.lexical / weights.sparse if weights.sparse > 0 else weights.lexical
        scored = [(c.chunk_id, c.sparse + lexical * c.lexical) for c in items]
    else:
        scored = [(c.chunk_id, weights.dense * c.dense + weights.sparse * c.sparse + weights.lexical * c.lexical)
                  for c in items]
    scored.sort(key=lambda pair: pair[1], reverse=True)
    return scored


# --- highlights -------------------------------------------------------------------------------
# The rule: the query is cut into terms — runs of letters and digits (kept whole with inner ``-``,
# ``_``, ``.``, ``/`` or ``:`` so ``E-4821`` or ``3.2.1`` stay one term) for alphabetic scripts, and
# character bigrams for Chinese, Japanese and Korean runs (a one-character run is its own term).
# Terms of one Latin letter are dropped. Every case-insensitive occurrence of a term in the content
# is a match (alphabetic terms only at word boundaries); overlapping or touching matches merge.

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"(?:(?![{_CJK}])\w)+(?:[-_./:](?:(?![{_CJK}])\w)+)*")


def query_terms(query: str) -> list[str]:
    text = unicodedata.normalize("NFKC", query).casefold()
    terms: list[str] = []
    for run in _CJK_RUN.findall(text):
        terms.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
    for word in _WORD.findall(text):
        if len(word) > 1 or word.isdigit():
            terms.append(word)
    return list(dict.fromkeys(terms))


# Bounded and linear: only the first ``HIGHLIGHT_QUERY_CHARS`` characters of the query are cut into
# terms, at most ``HIGHLIGHT_MAX_TERMS`` of them (terms longer than ``HIGHLIGHT_MAX_TERM_CHARS`` are
# not highlighted), and all terms are found in one pass over the content: one pattern for the
# alphabetic terms, one for the CJK ones, each tried only where a term's first character stands.
HIGHLIGHT_QUERY_CHARS = 1000
HIGHLIGHT_MAX_TERMS = 64
HIGHLIGHT_MAX_TERM_CHARS = 64


@dataclass(frozen=True, slots=True)
class Highlighter:
    """The highlight rule for one query, compiled once and applied to each result's content."""

    words: re.Pattern[str] | None
    cjk: re.Pattern[str] | None

    def __call__(self, content: str, limit: int = 64,
                 also: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int]]:
        """``also``: spans found otherwise (the identifiers the chunk holds as the identifier stage
        matched them, whatever their spelling: ``ＳＲ－８８３４６`` for ``SR-88346``), merged in."""
        spans: list[tuple[int, int]] = list(also)
        folded = content.casefold()
        if len(folded) != len(content):  # casefold changed lengths (e.g. ß): match on lower() instead
            folded = content.lower()
        if len(folded) == len(content):
            spans += [(m.start(), m.start() + len(m.group(1)))
                      for pattern in (self.words, self.cjk) if pattern is not None for m in pattern.finditer(folded)]
        return merge_spans(spans)[:limit]


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` spans sorted, overlapping or touching ones merged."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def highlighter(query: str) -> Highlighter:
    terms = [t for t in query_terms(query[:HIGHLIGHT_QUERY_CHARS]) if len(t) <= HIGHLIGHT_MAX_TERM_CHARS]
    terms = terms[:HIGHLIGHT_MAX_TERMS]
    cjk = [t for t in terms if _CJK_RUN.fullmatch(t)]
    words = [t for t in terms if not _CJK_RUN.fullmatch(t)]
    return Highlighter(_one_pass(words, r"(?<![^\W_])", r"(?![^\W_])"), _one_pass(cjk, "", ""))


def _one_pass(terms: list[str], before: str, after: str) -> re.Pattern[str] | None:
    """Every position where one of ``terms`` starts (longest first, so overlapping matches are all
    seen: the match is a look-ahead and the search moves on one character at a time)."""
    if not terms:
        return None
    first = "".join(sorted({re.escape(t[0]) for t in terms}))
    alternatives = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    return re.compile(f"{before}(?=[{first}])(?=({alternatives}){after})")


def highlights(content: str, query: str, limit: int = 64,
               also: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """``[start, end)`` character offsets in ``content`` of what matched the query (rule above),
    merged with ``also`` (see ``Highlighter``)."""
    return highlighter(query)(content, limit, also)


# --- language centring --------------------------------------------------------------------------
# A multilingual model scores a question higher against any text in the question's own language
# than against a relevant text in another. Each chunk's similarity is shifted by its language's
# mean similarity to the query (the query against the mean vector of that language's chunks in the
# knowledge base), relative to the average over the languages: ranking within one language is
# unchanged, and a knowledge base in one language is not affected at all.

_SCRIPTS = {"hangul": re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]"),
            "kana": re.compile("[\u3040-\u30ff]"), "han": re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
            "latin": re.compile("[A-Za-z\u00c0-\u024f]"), "cyrillic": re.compile("[\u0400-\u04ff]"),
            "arabic": re.compile("[\u0600-\u06ff]")}


def script_language(text: str) -> str:
    """The dominant script of ``text`` as a language label: ko, ja, zh, latin, cyrillic, arabic or
    other (Japanese: any kana among Han characters)."""
    if text.isascii():  # no script but latin can be there (one scan, not six)
        return "latin" if _SCRIPTS["latin"].search(text) else "other"
    counts = {name: len(p.findall(text)) for name, p in _SCRIPTS.items()}
    if counts["kana"] and counts["kana"] + counts["han"] >= max(counts.values()):
        return "ja"
    best = max(counts, key=lambda k: counts[k])
    if not counts[best]:
        return "other"
    return {"hangul": "ko", "han": "zh"}.get(best, best)


@dataclass(frozen=True, slots=True)
class CentringStrength:
    """How much of each language's measured bias centring takes off, per signal (1: all of it):
    of the language component (dense; the offsets where a chunk's coordinates are unknown) and of
    the mean offset (sparse). Swept by the bench (bench/RESULTS.md); the product takes it all."""

    dense: float = 1.0
    sparse: float = 1.0


@dataclass(frozen=True, slots=True)
class LanguageOffsets:
    """Per language: what to subtract from a chunk's dense and sparse similarity. And the query's
    dense vector less its own language's mean (normalised; None when the query's language is not
    one that counts), for a second dense candidate search: the plain vector's nearest chunks are
    its own language's, so a relevant chunk in another language can rank below every candidate the
    plain search returns, where no offset can lift it (bench/RESULTS.md, "Candidates across
    languages")."""

    dense: Mapping[str, float] = field(default_factory=dict)
    sparse: Mapping[str, float] = field(default_factory=dict)
    centred_query: tuple[float, ...] | None = None
    # language information removal: unit vectors spanning the differences of the languages' means,
    # and per direction what to take off a chunk's dense similarity per unit of its own coordinate
    # along it (the query's coordinate, scaled by how much the languages count)
    directions: tuple[tuple[float, ...], ...] = ()
    removal: tuple[float, ...] = ()

    def apply(self, chunk: ScoredChunk, language: str, coordinates: Sequence[float] | None = None) -> ScoredChunk:
        """``coordinates``: the chunk's dense vector along ``directions`` — then its own language
        component comes off its dense similarity; without them, its language's mean offset."""
        sparse = chunk.sparse - self.sparse.get(language, 0.0) if chunk.sparse else 0.0  # none yet: no bonus
        if coordinates is not None and self.removal:
            dense = chunk.dense - sum(r * x for r, x in zip(self.removal, coordinates, strict=True))
        else:
            dense = chunk.dense - self.dense.get(language, 0.0)
        return ScoredChunk(chunk.chunk_id, dense, sparse, chunk.lexical)


# BM25 across languages: a question shares its own language's common words and character bigrams
# with many chunks in that language, so in a multilingual knowledge base BM25 alone would pull a
# question towards its own language (the bias language centring removes from the similarities). A
# chunk's BM25 score counts only above what its language's candidates commonly reach (the
# ``LEXICAL_BASELINE`` quantile among them, over at least ``MIN_LEXICAL_PEERS``; else nothing is
# taken off): a rare term still lifts its chunk, shared words and "什么" no longer lift a language.
MIN_LEXICAL_PEERS = 5
LEXICAL_BASELINE = 0.9


def centre_lexical(chunks: Sequence[tuple[ScoredChunk, str]]) -> list[ScoredChunk]:
    """``chunks``: candidates with their languages."""
    by_language: dict[str, list[float]] = {}
    for chunk, language in chunks:
        by_language.setdefault(language, []).append(chunk.lexical)
    baseline = {language: _quantile(scores, LEXICAL_BASELINE) if len(scores) >= MIN_LEXICAL_PEERS else 0.0
                for language, scores in by_language.items()}
    return [replace(chunk, lexical=max(0.0, chunk.lexical - baseline[language])) for chunk, language in chunks]


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

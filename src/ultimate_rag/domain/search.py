"""What a search asks for (SPEC §10) and the pure parts of answering it: filters, score fusion and
the highlight rule. No I/O here; the adapters turn ``SearchFilters`` into their own query language.

Fusion (chosen by measurement, see docs/architecture.md and bench/retrieval.py): a chunk's score is
``dense_weight * dense + (1 - dense_weight) * sparse``, both cosine similarities of the same chunk,
so the gap between two close candidates survives (rank fusion would keep only their order).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from uuid import UUID

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
    """The query as the index sees it: the dense vector and the learned sparse one (index -> weight)."""

    dense: tuple[float, ...]
    sparse: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    """A candidate with both similarities (cosine; 0.0 where the chunk has no sparse vector)."""

    chunk_id: UUID
    dense: float
    sparse: float


def glob_to_regex(pattern: str) -> str:
    """A filename glob as an anchored POSIX regular expression (PostgreSQL ``~``)."""
    out, i = ["^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1:end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    return "".join(out)


def fuse(candidates: Iterable[ScoredChunk], mode: SearchMode, *, fusion: Fusion = Fusion.WEIGHTED,
         dense_weight: float = 0.5) -> list[tuple[UUID, float]]:
    """(chunk id, score) best first. ``dense``/``sparse`` mode: that similarity alone."""
    items = list(candidates)
    if mode is SearchMode.DENSE:
        scored = [(c.chunk_id, c.dense) for c in items]
    elif mode is SearchMode.SPARSE:
        scored = [(c.chunk_id, c.sparse) for c in items]
    elif fusion is Fusion.RRF:
        by_dense = {c.chunk_id: r for r, c in enumerate(sorted(items, key=lambda c: -c.dense), 1)}
        by_sparse = {c.chunk_id: r for r, c in enumerate(sorted(items, key=lambda c: -c.sparse), 1)}
        scored = [(c.chunk_id, 1 / (RRF_K + by_dense[c.chunk_id]) + 1 / (RRF_K + by_sparse[c.chunk_id]))
                  for c in items]
    else:
        scored = [(c.chunk_id, dense_weight * c.dense + (1 - dense_weight) * c.sparse) for c in items]
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


def highlights(content: str, query: str, limit: int = 64,
               also: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """``[start, end)`` character offsets in ``content`` of what matched the query (rule above),
    merged with ``also`` (the identifiers the chunk holds as the identifier stage matched them,
    whatever their spelling: ``ＳＲ－８８３４６`` for ``SR-88346``)."""
    spans: list[tuple[int, int]] = list(also)
    terms = query_terms(query)
    folded = content.casefold()
    if len(folded) != len(content):  # casefold changed lengths (e.g. ß): match on lower() instead
        folded = content.lower()
    if len(folded) != len(content):
        terms = []
    for term in terms:
        cjk = bool(_CJK_RUN.fullmatch(term))
        pattern = re.escape(term) if cjk else rf"(?<![^\W_]){re.escape(term)}(?![^\W_])"
        spans.extend((m.start(), m.end()) for m in re.finditer(pattern, folded))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged[:limit]


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
class LanguageOffsets:
    """Per language: what to subtract from a chunk's dense and sparse similarity."""

    dense: Mapping[str, float] = field(default_factory=dict)
    sparse: Mapping[str, float] = field(default_factory=dict)

    def apply(self, chunk: ScoredChunk, language: str) -> ScoredChunk:
        sparse = chunk.sparse - self.sparse.get(language, 0.0) if chunk.sparse else 0.0  # none yet: no bonus
        return ScoredChunk(chunk.chunk_id, chunk.dense - self.dense.get(language, 0.0), sparse)

"""BM25, the lexical side of search (docs/search.md): what a chunk's terms are, the weight each
term gets in the chunk, and the weight it gets in a query. No I/O here.

Terms: the text is NFKC-normalised and case-folded; Chinese, Japanese and Korean runs are cut into
character bigrams (a one-character run is its own term), other scripts into words (letters and
digits, kept whole with inner ``-``, ``_``, ``.``, ``/``, ``:`` so ``E-4821`` is one term, and its
parts added beside it). A knowledge base whose ``korean_terms`` is ``morphemes`` cuts Hangul into
the morphemes of a Korean analyzer instead (``KoreanMorphemes``: an adapter's, given by the
caller); bigrams stay for Chinese and Japanese.

A term is stored as a hashed index (CRC-32 of the knowledge base's id and the term, over 2^29
indexes), so a chunk's BM25 weights are a pgvector ``sparsevec`` and the inverted index is
PostgreSQL's GIN on the indexes; a collision needs two terms of one knowledge
base to share an index out of 536 million.

The chunk side carries BM25's term-frequency saturation and length normalisation against a fixed
average length (chunks are bounded by the chunker, so a fixed average stands in for the corpus's
without rewriting every vector as the knowledge base grows); the query side carries each term's
IDF from the knowledge base's document frequencies (per chunk), read at query time. A chunk's
score is the inner product of the two, divided by the query's total IDF: a chunk with every query
term once at average length scores about 1.
"""

from __future__ import annotations

import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

LEXICAL_DIMENSION = 1 << 29  # pgvector's sparsevec holds up to 10^9 dimensions
K1 = 1.2
B = 0.75
AVERAGE_TERMS = 160.0  # a chunk of the chunker's default size (256 model tokens) has about this many terms
CANDIDATE_POSTINGS = 20_000  # the inverted-index lookup reads the rarest query terms up to about this many chunks
MAX_QUERY_TERMS = 64

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_HANGUL = r"\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK_RUN_BUT_HANGUL = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_HAS_HANGUL = re.compile(f"[{_HANGUL}]")

KoreanMorphemes = Callable[[str], list[str]]
"""A Korean analyzer: the content morphemes of a (folded) text that hold Hangul, in order."""
BIGRAMS = "bigrams"  # a knowledge base's ``korean_terms``: Hangul as character bigrams
MORPHEMES = "morphemes"  # ... or as a Korean analyzer's morphemes
_WORD = re.compile(rf"(?:(?![{_CJK}])\w)+(?:[-_./:](?:(?![{_CJK}])\w)+)*")
_PART = re.compile(rf"(?:(?![{_CJK}_])\w)+")


def korean_of(korean_terms: str, analyzer: KoreanMorphemes | None) -> KoreanMorphemes | None:
    """The analyzer a knowledge base's ``korean_terms`` asks for: None for bigrams."""
    return analyzer if korean_terms == MORPHEMES else None


def has_hangul(text: str) -> bool:
    return _HAS_HANGUL.search(text) is not None


def terms(text: str, korean: KoreanMorphemes | None = None) -> list[str]:
    """The text's terms in order, with repeats (a term's count is its frequency); ``korean``: Hangul
    as that analyzer's morphemes rather than character bigrams."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    if korean is not None and has_hangul(folded):
        out.extend(m for m in korean(folded) if has_hangul(m))
        runs = _CJK_RUN_BUT_HANGUL.findall(folded)
    else:
        runs = _CJK_RUN.findall(folded)
    for run in runs:
        out.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
    for word in _WORD.findall(folded):
        if len(word) > 1 or word.isdigit():
            out.append(word)
        parts = _PART.findall(word)
        if len(parts) > 1:  # E-4821 also matches "E 4821"; v2.14.1 also its numbers
            out.extend(p for p in parts if len(p) > 1 or p.isdigit())
    return out


def term_index(knowledge_base_id: UUID, term: str) -> int:
    """The term's index in the knowledge base's hashed term space."""
    return zlib.crc32(term.encode(), zlib.crc32(knowledge_base_id.bytes)) % LEXICAL_DIMENSION


@dataclass(frozen=True, slots=True)
class ChunkTerms:
    """A chunk's BM25 weights by term index (sorted), and how many terms it has."""

    weights: Mapping[int, float]
    length: int

    @property
    def indexes(self) -> list[int]:
        return sorted(self.weights)


def chunk_terms(knowledge_base_id: UUID, text: str, korean: KoreanMorphemes | None = None) -> ChunkTerms:
    counts = Counter(term_index(knowledge_base_id, t) for t in terms(text, korean))
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / AVERAGE_TERMS)
    return ChunkTerms({i: tf * (K1 + 1) / (tf + norm) for i, tf in sorted(counts.items())}, length)


def chunks_terms(knowledge_base_id: UUID, texts: Sequence[str],
                 korean: KoreanMorphemes | None = None) -> list[ChunkTerms]:
    return [chunk_terms(knowledge_base_id, text, korean) for text in texts]


def document_frequencies(chunks: Iterable[ChunkTerms]) -> dict[int, int]:
    """How many of ``chunks`` contain each term: a document's share of its knowledge base's
    document frequencies."""
    df: Counter[int] = Counter()
    for chunk in chunks:
        df.update(chunk.weights.keys())
    return dict(df)


@dataclass(frozen=True, slots=True)
class LexicalShare:
    """A document revision's share of its knowledge base's lexical statistics: its chunk count and
    each term's document frequency among its chunks."""

    document_id: UUID
    revision: int
    chunks: int
    frequencies: Mapping[int, int]

    @classmethod
    def of(cls, document_id: UUID, revision: int, chunks: Sequence[ChunkTerms]) -> LexicalShare:
        return cls(document_id, revision, len(chunks), document_frequencies(chunks))


def query_indexes(knowledge_base_id: UUID, query: str, korean: KoreanMorphemes | None = None) -> list[int]:
    """The query's distinct term indexes (at most ``MAX_QUERY_TERMS``), in order of appearance."""
    seen = dict.fromkeys(term_index(knowledge_base_id, t) for t in terms(query, korean))
    return list(seen)[:MAX_QUERY_TERMS]


def idf(chunks: int, df: int) -> float:
    """BM25's IDF (the non-negative form): rare terms weigh most; a term in every chunk still a little."""
    return math.log(1 + (chunks - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """The query as the lexical index sees it: each term's IDF, the terms whose postings give the
    candidates (the rarest, up to ``CANDIDATE_POSTINGS`` chunks; never none), and the query's total
    IDF, the score's divisor — over every query term, those in no chunk too (at the IDF of a term in
    none), so that matching the one common word of a question whose other words are nowhere scores
    little, not everything."""

    weights: Mapping[int, float]
    candidates: tuple[int, ...]
    total: float

    def score(self, raw: float) -> float:
        return raw / self.total if self.total > 0 else 0.0


def lexical_query(indexes: Iterable[int], chunks: int, frequencies: Mapping[int, int], *,
                  postings: int = CANDIDATE_POSTINGS) -> LexicalQuery | None:
    """None when no query term is in any chunk of the knowledge base (nothing to match)."""
    indexes = list(indexes)
    present = {i: frequencies[i] for i in indexes if frequencies.get(i, 0) > 0}
    if not present or chunks <= 0:
        return None
    weights = {i: idf(chunks, df) for i, df in present.items()}
    total = sum(idf(chunks, frequencies.get(i, 0)) for i in dict.fromkeys(indexes))
    candidates: list[int] = []
    read = 0
    for index, df in sorted(present.items(), key=lambda item: item[1]):
        if candidates and read + df > postings:
            break
        candidates.append(index)
        read += df
    return LexicalQuery(weights, tuple(candidates), total)

"""Per knowledge base, model and script language: the sum and count of the published chunks' dense
and sparse vectors (``language_centroids``), for the language centring of search scores
(docs/search.md). The READY commit records the published revision's share per language
(``language_shares``) and the database adds it (pgvector's ``+``), in one statement for all its
languages; when the revision stops being the published one (a newer one, a delete, deduplication,
a removal) migration 0023's trigger takes it out again. The sums are those of the published
revisions, however often documents are rebuilt.

Read by the search service, cached per process for ``ttl`` seconds, and blended with the reference
means shipped with the product (``language_prior.py``): a language counts once it holds at least
``MIN_LANGUAGE_SHARE`` of the knowledge base's chunks, from its first document on."""

from __future__ import annotations

import time
from collections.abc import Sequence
from uuid import UUID

import numpy as np
from pgvector import Vector

from ...domain.models import EmbeddedChunk
from ...domain.search import CentringStrength, LanguageOffsets, QueryVectors, script_language
from ..embedders.language_prior import LanguagePrior
from ..embedders.sparse import SPARSE_DIMENSION
from .database import Database, transaction_on
from .sql import load_queries

Centroids = dict[str, tuple[np.ndarray, np.ndarray, int]]  # language -> (dense mean, sparse mean, chunks)

Q = load_queries("centroids.sql")
# A language counts for centring once it holds this share of the knowledge base's chunks: a few
# Latin-script tables in a Korean knowledge base are not a second language (centring on them would
# only shift the Korean chunks against them).
MIN_LANGUAGE_SHARE = 0.1
# How many chunks the reference means weigh against a knowledge base's own: with a handful of
# chunks a language's mean is their content, with hundreds it is the language (no jump between).
PRIOR_CHUNKS = 20.0


class LanguageCentroids:
    def __init__(self, db: Database, *, ttl: float = 60.0, prior: LanguagePrior | None = None,
                 min_share: float = MIN_LANGUAGE_SHARE, prior_chunks: float = PRIOR_CHUNKS) -> None:
        self._db = db
        self._ttl = ttl
        self._cache: dict[tuple[UUID, str], tuple[float, Centroids]] = {}
        self._prior = prior
        self._min_share = min_share
        self._prior_chunks = prior_chunks
        self.strength = CentringStrength()  # all of each bias (bench/retrieval_public.py --strengths sweeps it)

    async def add(self, knowledge_base_id: UUID, model: str, items: Sequence[EmbeddedChunk], *,
                  document: tuple[UUID, int], within: object = None) -> None:
        """The published revision ``document`` (id, revision)'s shares, recorded and added (nothing
        when that revision is not the published one, or was added already). ``within``: an open
        transaction on this database to write in (the READY commit's). One statement for every
        language (the database sums the vectors)."""
        by_language: dict[str, list[EmbeddedChunk]] = {}
        for item in items:
            by_language.setdefault(script_language(item.chunk.content), []).append(item)
        languages = sorted(by_language)
        with_sparse = any(i.sparse for i in items)  # else the sparse sums stay as they are
        counts = [len(by_language[language]) for language in languages]
        dense = [Vector(_dense_sum(by_language[language])) for language in languages]
        low: list[Vector] | None = None
        high: list[Vector] | None = None
        if with_sparse:
            sparse = [_sparse_sum(by_language[language]) for language in languages]
            low, high = [Vector(s[:_HALF]) for s in sparse], [Vector(s[_HALF:]) for s in sparse]
        async with transaction_on(self._db, within) as conn:
            rows = await (await conn.execute(Q["add_shares"], {
                "kb": knowledge_base_id, "model": model, "document_id": document[0], "revision": document[1],
                "languages": languages, "counts": counts, "dense": dense,
                "sparse_low": low, "sparse_high": high})).fetchall()
            for row in rows:
                i, language = languages.index(row["language"]), row["language"]
                if not row["added"]:  # its sums had another dimension: it starts over
                    await conn.execute(Q["reset_centroid"], {
                        "kb": knowledge_base_id, "model": model, "language": language, "n": counts[i],
                        "dense": dense[i], "sparse_low": low[i] if low else None,
                        "sparse_high": high[i] if high else None})

    async def means(self, knowledge_base_id: UUID, model: str) -> Centroids:
        """The knowledge base's own mean vectors and chunk count of each language."""
        key = (knowledge_base_id, model)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        rows = await self._db.fetchall(Q["centroids"], {"kb": knowledge_base_id, "model": model, "min_chunks": 1})
        means = {r["language"]: (_sum(r["dense"], r["dense_sum"]) / r["n"],
                                 _sum(r["sparse"], r["sparse_low"], r["sparse_high"]) / r["n"], int(r["n"]))
                 for r in rows}
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (time.monotonic(), means)
        return means

    def blended(self, own: Centroids, model: str, *,
                min_chunks: int) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
        """Each language's mean, its own blended with the reference mean weighted by chunks
        (``PRIOR_CHUNKS`` for the reference), and how much it counts, from 0 to 1: a language comes
        in as its share of the chunks goes from half ``min_share`` to ``min_share`` (and, without a
        reference mean, as its chunks go from half ``min_chunks`` to ``min_chunks``) — gradually, so
        that a growing knowledge base sees no jump."""
        total = sum(n for _, _, n in own.values())
        prior = self._prior.means if self._prior is not None and self._prior.model == model else {}
        out: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
        for language, (dense, sparse, n) in own.items():
            weight = _ramp(n / total if total else 0.0, self._min_share)
            reference = prior.get(language)
            if reference is None or reference[0].shape != dense.shape:
                weight *= _ramp(float(n), float(min_chunks))
                if weight > 0:
                    out[language] = (dense, sparse, weight)
                continue
            if weight > 0:
                w = self._prior_chunks / (self._prior_chunks + n)
                ref_dense, ref_sparse = reference
                out[language] = (w * ref_dense + (1 - w) * dense,
                                 w * ref_sparse + (1 - w) * sparse if ref_sparse.shape == sparse.shape else sparse,
                                 weight)
        return out

    async def offsets(self, knowledge_base_id: UUID, model: str, query: QueryVectors, *,
                      min_chunks: int, language: str | None = None) -> LanguageOffsets | None:
        """``ports.CentroidStore.offsets``: the query's similarity to each counting language's mean
        less their (weighted) average, scaled by how much the language counts (None with fewer than
        two languages counting); with the query's ``language``, the centred query too."""
        means = self.blended(await self.means(knowledge_base_id, model), model, min_chunks=min_chunks)
        if len(means) < 2:
            return None
        q = np.asarray(query.dense, dtype=np.float32)
        idx = np.fromiter(query.sparse.keys(), dtype=np.int64, count=len(query.sparse))
        val = np.fromiter(query.sparse.values(), dtype=np.float32, count=len(query.sparse))
        weights = {lang: w for lang, (_, _, w) in means.items()}
        dense = {lang: float(q @ d) if d.shape == q.shape else 0.0 for lang, (d, _, _) in means.items()}
        sparse = {lang: float(val @ s[idx]) if len(idx) and len(s) else 0.0 for lang, (_, s, _) in means.items()}
        directions, scales = _language_directions({lang: d for lang, (d, _, _) in means.items() if d.shape == q.shape},
                                                  weights)
        return LanguageOffsets(dense=_centred(dense, weights, self.strength.dense),
                               sparse=_centred(sparse, weights, self.strength.sparse),
                               centred_query=_without(q, means[language][0]) if language in means else None,
                               directions=tuple(tuple(d.tolist()) for d in directions),
                               removal=tuple(self.strength.dense * scale * float(d @ q)
                                             for d, scale in zip(directions, scales, strict=True)))


def _ramp(value: float, full: float) -> float:
    """0 up to half ``full``, 1 from ``full``, linear between."""
    if full <= 0:
        return 1.0
    return min(1.0, max(0.0, (value - full / 2) / (full / 2)))


def _centred(similarity: dict[str, float], weights: dict[str, float], strength: float) -> dict[str, float]:
    mean = sum(similarity[k] * weights[k] for k in similarity) / sum(weights.values())
    return {k: strength * weights[k] * (v - mean) for k, v in similarity.items()}


def _language_directions(means: dict[str, np.ndarray],
                         weights: dict[str, float]) -> tuple[list[np.ndarray], list[float]]:
    """Unit vectors spanning the differences of the languages' means (Gram-Schmidt from the one
    that counts most), each with how much it counts: a language coming in adds its direction at its
    own weight (at most the first's), so the removal grows with it, never by a jump. The language
    information removal of Yang et al. (2021), "A Simple and Effective Method To Eliminate the Self
    Language Bias in Multilingual Representations"."""
    order = sorted(means, key=lambda lang: (-weights[lang], lang))
    if len(order) < 2:
        return [], []
    anchor = means[order[0]]
    directions: list[np.ndarray] = []
    scales: list[float] = []
    for language in order[1:]:
        u = (means[language] - anchor).astype(np.float64)
        for d in directions:
            u -= (u @ d) * d
        norm = float(np.linalg.norm(u))
        if norm > 1e-6:
            directions.append(u / norm)
            scales.append(min(weights[language], weights[order[0]]))
    return directions, scales


def _without(query: np.ndarray, mean: np.ndarray) -> tuple[float, ...] | None:
    """``query`` less ``mean``, normalised (None when they are one direction, or of other widths)."""
    if mean.shape != query.shape:
        return None
    centred = query - mean
    norm = float(np.linalg.norm(centred))
    return tuple((centred / norm).tolist()) if norm > 1e-6 else None


_HALF = SPARSE_DIMENSION // 2  # the sparse sum's halves: sparse_low, sparse_high


def _dense_sum(group: Sequence[EmbeddedChunk]) -> np.ndarray:
    total: np.ndarray = np.asarray([i.embedding for i in group], dtype=np.float32).sum(axis=0)
    return total


def _sparse_sum(group: Sequence[EmbeddedChunk]) -> np.ndarray:
    total = np.zeros(SPARSE_DIMENSION, dtype=np.float32)
    for item in group:
        for index, weight in (item.sparse or {}).items():
            total[index] += weight
    return total


def _sum(legacy: bytes, *added: Vector | str | None) -> np.ndarray:
    """A sum from its two parts: the float32 bytes written before migration 0019 (empty for a row
    made since, ignored when of another width) and the vector(s) the database has added to since
    (text on a connection opened before the vector type existed, which has no loader for it)."""
    parts = [(Vector.from_text(v) if isinstance(v, str) else v).to_numpy().astype(np.float32)
             for v in added if v is not None]
    new = np.concatenate(parts) if len(parts) == len(added) else None
    old = np.frombuffer(legacy, dtype=np.float32)
    if new is None:
        return old.copy()
    return new + old if old.shape == new.shape else new

"""Per knowledge base, model and script language: the running sum and count of the chunks' dense
and sparse vectors (``language_centroids``), for the language centring of search scores. The
database adds each document's share (pgvector's ``+``), in one statement for all its languages.

Written when a document is indexed (added, never subtracted: a deleted or re-indexed document
leaves its share in, which shifts a mean only as much as that document is typical of its
language). Read by the search service, cached per process for ``ttl`` seconds."""

from __future__ import annotations

import time
from collections.abc import Sequence
from uuid import UUID

import numpy as np
from pgvector import Vector

from ...domain.models import EmbeddedChunk
from ...domain.search import LanguageOffsets, QueryVectors, script_language
from ..embedders.sparse import SPARSE_DIMENSION
from .database import Database, transaction_on
from .sql import load_queries

Centroids = dict[str, tuple[np.ndarray, np.ndarray]]  # language -> (dense mean, sparse mean)

Q = load_queries("centroids.sql")


class LanguageCentroids:
    def __init__(self, db: Database, *, ttl: float = 60.0) -> None:
        self._db = db
        self._ttl = ttl
        self._cache: dict[tuple[UUID, str, int], tuple[float, Centroids]] = {}

    async def add(self, knowledge_base_id: UUID, model: str, items: Sequence[EmbeddedChunk], *,
                  within: object = None) -> None:
        """``within``: an open transaction on this database to write in (the READY commit's). One
        statement adds every language's share (the database sums the vectors)."""
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
            added = {r["language"] for r in await (await conn.execute(Q["add_shares"], {
                "kb": knowledge_base_id, "model": model, "languages": languages, "counts": counts, "dense": dense,
                "sparse_low": low, "sparse_high": high})).fetchall()}
            for i, language in enumerate(languages):
                if language not in added:  # its sums had another dimension: it starts over
                    await conn.execute(Q["reset_centroid"], {
                        "kb": knowledge_base_id, "model": model, "language": language, "n": counts[i],
                        "dense": dense[i], "sparse_low": low[i] if low else None,
                        "sparse_high": high[i] if high else None})

    async def means(self, knowledge_base_id: UUID, model: str, *, min_chunks: int = 1) -> Centroids:
        """The mean vectors of each language with at least ``min_chunks`` chunks."""
        key = (knowledge_base_id, model, min_chunks)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        rows = await self._db.fetchall(Q["centroids"], {"kb": knowledge_base_id, "model": model,
                                                        "min_chunks": max(1, min_chunks)})
        means = {r["language"]: (_sum(r["dense"], r["dense_sum"]) / r["n"],
                                 _sum(r["sparse"], r["sparse_low"], r["sparse_high"]) / r["n"]) for r in rows}
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (time.monotonic(), means)
        return means


    async def offsets(self, knowledge_base_id: UUID, model: str, query: QueryVectors, *,
                      min_chunks: int) -> LanguageOffsets | None:
        """``ports.CentroidStore.offsets``: the query's similarity to each language's mean less
        their average (None with fewer than two languages of ``min_chunks`` chunks)."""
        means = await self.means(knowledge_base_id, model, min_chunks=min_chunks)
        if len(means) < 2:
            return None
        q = np.asarray(query.dense, dtype=np.float32)
        idx = np.fromiter(query.sparse.keys(), dtype=np.int64, count=len(query.sparse))
        val = np.fromiter(query.sparse.values(), dtype=np.float32, count=len(query.sparse))
        dense = {lang: float(q @ d) if d.shape == q.shape else 0.0 for lang, (d, _) in means.items()}
        sparse = {lang: float(val @ s[idx]) if len(idx) else 0.0 for lang, (_, s) in means.items()}
        dense_bar, sparse_bar = sum(dense.values()) / len(dense), sum(sparse.values()) / len(sparse)
        return LanguageOffsets(dense={k: v - dense_bar for k, v in dense.items()},
                               sparse={k: v - sparse_bar for k, v in sparse.items()})


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

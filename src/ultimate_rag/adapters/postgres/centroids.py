"""Per knowledge base, model and script language: the running sum and count of the chunks' dense
and sparse vectors (``language_centroids``), for the language centring of search scores.

Written when a document is indexed (added, never subtracted: a deleted or re-indexed document
leaves its share in, which shifts a mean only as much as that document is typical of its
language). Read by the search service, cached per process for ``ttl`` seconds."""

from __future__ import annotations

import time
from collections.abc import Sequence
from uuid import UUID

import numpy as np

from ...domain.models import EmbeddedChunk
from ...domain.search import script_language
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
        """``within``: an open transaction on this database to write in (the READY commit's)."""
        by_language: dict[str, list[EmbeddedChunk]] = {}
        for item in items:
            by_language.setdefault(script_language(item.chunk.content), []).append(item)
        async with transaction_on(self._db, within) as conn:
            for language, group in sorted(by_language.items()):
                dense = np.sum([np.asarray(i.embedding, dtype=np.float32) for i in group], axis=0)
                with_sparse = any(i.sparse for i in group)  # else the sparse sum stays as it is, unread
                key = {"kb": knowledge_base_id, "model": model, "language": language}
                row = await (await conn.execute(Q["lock_centroid"], key | {"with_sparse": with_sparse})).fetchone()
                assert row is not None
                old_dense = np.frombuffer(row["dense"], dtype=np.float32)
                if old_dense.shape != dense.shape:  # a new row (empty), or another dimension: start over
                    old_dense, row["n"] = np.zeros_like(dense), 0
                sparse_sum = None
                if with_sparse:
                    sparse = np.zeros(SPARSE_DIMENSION, dtype=np.float32)
                    for i in group:
                        for index, weight in (i.sparse or {}).items():
                            sparse[index] += weight
                    old_sparse = np.frombuffer(row["sparse"], dtype=np.float32)
                    if old_sparse.shape != sparse.shape:
                        old_sparse = np.zeros_like(sparse)
                    sparse_sum = (old_sparse + sparse).tobytes()
                await conn.execute(Q["write_centroid"], key | {
                    "n": row["n"] + len(group), "dense": (old_dense + dense).tobytes(), "sparse": sparse_sum})

    async def means(self, knowledge_base_id: UUID, model: str, *, min_chunks: int = 1) -> Centroids:
        """The mean vectors of each language with at least ``min_chunks`` chunks."""
        key = (knowledge_base_id, model, min_chunks)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        rows = await self._db.fetchall(Q["centroids"], {"kb": knowledge_base_id, "model": model,
                                                        "min_chunks": max(1, min_chunks)})
        means = {r["language"]: (np.frombuffer(r["dense"], dtype=np.float32) / r["n"],
                                 np.frombuffer(r["sparse"], dtype=np.float32) / r["n"]) for r in rows}
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (time.monotonic(), means)
        return means

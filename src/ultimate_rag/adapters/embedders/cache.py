"""Embedding cache in PostgreSQL, keyed by (knowledge base, model, sha256 of the text): a chunk whose
text did not change is never embedded again — on retry, on reindex after a parser upgrade, or when
another document of the same knowledge base holds the same passage.

Scoped to one knowledge base on purpose: a document reports how many chunks came from the cache, so
a cache shared between knowledge bases would tell an editor of one whether a sentence exists in
another. Entries go with their knowledge base (a foreign key with ON DELETE CASCADE), and
``evict`` keeps the table at a size bound, least recently used first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

import numpy as np
from pgvector import SparseVector, Vector
from psycopg import sql

from ...domain.ids import text_hash
from ..postgres.database import Database
from ..postgres.sql import load_queries

# A hit refreshes ``last_used_at`` only when it is older than this: re-reading a hot entry costs no
# write, and least-recently-used stays exact to within this window.
TOUCH_AFTER_SECONDS = 600.0
V = TypeVar("V")

Q = load_queries("cache.sql", __package__)


class EmbeddingCache:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get_many(self, knowledge_base_id: UUID, model: str, texts: Sequence[str]) -> dict[bytes, list[float]]:
        return await self._get("embedding", _as_list, knowledge_base_id, model, texts)

    async def put_many(self, knowledge_base_id: UUID, model: str,
                       items: Sequence[tuple[str, Sequence[float]]]) -> None:
        await self._put("embedding", knowledge_base_id, model,
                        [(t, Vector(np.asarray(v, dtype=np.float32))) for t, v in items])

    async def get_sparse(self, knowledge_base_id: UUID, model: str,
                         texts: Sequence[str]) -> dict[bytes, dict[int, float]]:
        """Sparse vectors (index -> weight) cached under ``model`` (the sparse model's name)."""
        return await self._get("sparse", sparse_as_dict, knowledge_base_id, model, texts)

    async def put_sparse(self, knowledge_base_id: UUID, model: str, dimension: int,
                         items: Sequence[tuple[str, dict[int, float]]]) -> None:
        await self._put("sparse", knowledge_base_id, model, [(t, SparseVector(v, dimension)) for t, v in items])

    async def _get(self, column: str, convert: Callable[[Any], V], knowledge_base_id: UUID, model: str,
                   texts: Sequence[str]) -> dict[bytes, V]:
        """The cached values of ``column`` (``embedding`` or ``sparse``) by text hash."""
        hashes = list({text_hash(t) for t in texts})
        if not hashes:
            return {}
        found = await self._db.fetchall(_with(column, "get"), {
            "kb": knowledge_base_id, "model": model, "hashes": hashes, "touch_after": TOUCH_AFTER_SECONDS},
            binary=True)  # a vector as 1.5 KiB of floats, not 4 KiB of text to parse
        return {bytes(r["text_hash"]): convert(r[column]) for r in found if r[column] is not None}

    async def _put(self, column: str, knowledge_base_id: UUID, model: str, items: Sequence[tuple[str, object]]) -> None:
        """One statement for all of ``items`` (its own transaction)."""
        if not items:
            return
        await self._db.execute(_with(column, "put"), {
            "kb": knowledge_base_id, "model": model, "hashes": [text_hash(t) for t, _ in items],
            "values": [value for _, value in items]})

    async def evict(self, max_entries: int, batch_size: int = 10_000) -> int:
        """Remove the least recently used entries beyond ``max_entries``, in batches (short
        transactions); returns how many went. Run by the janitor, off the ingest path."""
        removed = 0
        while True:
            row = await self._db.fetchone(Q["count"])
            excess = (row["n"] if row else 0) - max_entries
            if excess <= 0:
                return removed
            async with self._db.transaction() as conn:
                result = await conn.execute(Q["evict"], {"n": min(excess, batch_size)})
                removed += result.rowcount
            if result.rowcount <= 0:
                return removed


_KIND = {"embedding": "vector", "sparse": "sparsevec"}  # each column's type


def _with(column: str, name: str) -> sql.Composed:
    """The named query ``name`` on the cache's ``column`` (``embedding`` or ``sparse``)."""
    return sql.SQL(Q[name]).format(column=sql.Identifier(column), kind=sql.SQL(_KIND[column]))


def _as_list(value: Any) -> list[float]:  # a vector as the database driver returned it
    if isinstance(value, bytes):  # the vector type was not registered on this connection (binary results)
        value = Vector.from_binary(value)
    if isinstance(value, Vector):
        return value.to_list()
    if isinstance(value, np.ndarray):
        floats: list[float] = value.astype(float).tolist()
        return floats
    if isinstance(value, str):  # the vector type was not registered on this connection
        return [float(x) for x in value.strip("[]").split(",")]
    return [float(x) for x in value]


def sparse_as_dict(value: object) -> dict[int, float]:
    if isinstance(value, bytes):  # not registered on this connection, binary results
        value = SparseVector.from_binary(value)
    if isinstance(value, SparseVector):
        return {int(i): float(v) for i, v in zip(value.indices(), value.values(), strict=True)}
    if isinstance(value, str):  # '{1:0.5,7:0.25}/16384', indices 1-based
        body = value.split("/")[0].strip("{}")
        return {int(k) - 1: float(v) for k, v in (p.split(":") for p in body.split(",") if p)}
    raise TypeError(f"not a sparse vector: {type(value).__name__}")

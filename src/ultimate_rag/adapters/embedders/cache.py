"""Embedding cache in PostgreSQL, keyed by (model, sha256 of the text): a chunk whose text did not
change is never embedded again — on retry, on reindex after a parser upgrade, or when another
document holds the same passage."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pgvector import Vector

from ...domain.ids import text_hash
from ..postgres.database import Database


class EmbeddingCache:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get_many(self, model: str, texts: Sequence[str]) -> dict[bytes, list[float]]:
        hashes = list({text_hash(t) for t in texts})
        if not hashes:
            return {}
        found = await self._db.fetchall(
            "SELECT text_hash, embedding FROM embedding_cache WHERE model = %s AND text_hash = ANY(%s)",
            (model, hashes),
        )
        return {bytes(r["text_hash"]): _as_list(r["embedding"]) for r in found}

    async def put_many(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        if not items:
            return
        async with self._db.transaction() as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO embedding_cache (model, text_hash, embedding) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                [(model, text_hash(t), Vector(np.asarray(v, dtype=np.float32))) for t, v in items],
            )


def _as_list(value: object) -> list[float]:
    if isinstance(value, Vector):
        return value.to_list()
    if isinstance(value, np.ndarray):
        return value.astype(float).tolist()
    if isinstance(value, str):  # the vector type was not registered on this connection
        return [float(x) for x in value.strip("[]").split(",")]
    return [float(x) for x in value]  # type: ignore[attr-defined]

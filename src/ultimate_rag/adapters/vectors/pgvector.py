"""pgvector in the same PostgreSQL: one table per embedding dimension, HNSW with cosine distance.

Knowledge-base filtering uses ``hnsw.iterative_scan`` (pgvector >= 0.8): without it a filtered
HNSW query can return too few rows, or none after deletes, because the filter is applied after
the first ``ef_search`` candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np
from pgvector import Vector

from ...domain.models import EmbeddedChunk, VectorHit
from ..postgres.database import Database


class PgVectorStore:
    def __init__(self, db: Database, dimension: int) -> None:
        self._db = db
        self.dimension = dimension
        self.table = f"chunk_vectors_{int(dimension)}"

    async def ensure_ready(self) -> None:
        async with self._db.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                " chunk_id uuid PRIMARY KEY, document_id uuid NOT NULL, knowledge_base_id uuid NOT NULL,"
                f" embedding vector({self.dimension}) NOT NULL)"
            )
            await conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_document_idx ON {self.table} (document_id)")
            await conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_kb_idx ON {self.table} (knowledge_base_id)")
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS {self.table}_hnsw_idx ON {self.table}"
                " USING hnsw (embedding vector_cosine_ops)"
            )

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        if not items:
            return
        async with self._db.transaction() as conn, conn.cursor() as cur:
            await cur.executemany(
                f"INSERT INTO {self.table} (chunk_id, document_id, knowledge_base_id, embedding)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (chunk_id) DO UPDATE"
                " SET embedding = EXCLUDED.embedding, document_id = EXCLUDED.document_id,"
                " knowledge_base_id = EXCLUDED.knowledge_base_id",
                [(i.chunk.id, i.chunk.document_id, knowledge_base_id,
                  Vector(np.asarray(i.embedding, dtype=np.float32))) for i in items],
            )

    async def delete_by_document(self, document_id: UUID) -> None:
        await self._db.execute(f"DELETE FROM {self.table} WHERE document_id = %s", (document_id,))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await self._db.execute(f"DELETE FROM {self.table} WHERE knowledge_base_id = %s", (knowledge_base_id,))

    async def count_by_document(self, document_id: UUID) -> int:
        row = await self._db.fetchone(
            f"SELECT count(*) AS n FROM {self.table} WHERE document_id = %s", (document_id,)
        )
        return int(row["n"]) if row else 0

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int) -> list[VectorHit]:
        query = Vector(np.asarray(vector, dtype=np.float32))
        async with self._db.transaction() as conn:
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            await conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(int(limit), 1000))}")
            cur = await conn.execute(
                f"SELECT chunk_id, 1 - (embedding <=> %(q)s) AS score FROM {self.table}"
                " WHERE knowledge_base_id = %(kb)s ORDER BY embedding <=> %(q)s LIMIT %(n)s",
                {"q": query, "kb": knowledge_base_id, "n": limit},
            )
            found = await cur.fetchall()
        hits = [VectorHit(chunk_id=r["chunk_id"], score=float(r["score"])) for r in found]
        hits.sort(key=lambda h: h.score, reverse=True)  # relaxed_order may be slightly out of order
        return hits

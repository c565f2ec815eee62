"""pgvector in the same PostgreSQL: one table per embedding dimension, HNSW with cosine distance.
The learned sparse vectors sit beside them (``chunk_sparse_vectors``): a hybrid search is two
statements run at once — the dense top and the sparse top, each filtered inside its index scan,
each with both similarities of its candidates — and the search service fuses them.

Knowledge-base filtering uses ``hnsw.iterative_scan`` (pgvector >= 0.8): without it a filtered
HNSW query can return too few rows, or none after deletes, because the filter is applied after
the first ``ef_search`` candidates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np
from pgvector import Vector
from psycopg import sql

from ...domain.models import EmbeddedChunk, VectorHit
from ...domain.ports import CandidateSearch
from ...domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ..postgres.database import Database
from ..postgres.search_filters import vector_row_filter
from .sparse_pg import SPARSE_TABLE, PostgresSparseIndex, as_sparsevec, knn


class PgVectorStore(CandidateSearch):
    def __init__(self, db: Database, dimension: int, *, table: str | None = None, with_sparse: bool = True) -> None:
        """``table``: another index generation's table (adapters/vectors/generations.py);
        ``with_sparse`` False: writes and deletes leave the shared sparse table alone (the
        generation router keeps it, as one sparse vector serves every generation)."""
        self._db = db
        self.dimension = dimension
        self.table = table or f"chunk_vectors_{int(dimension)}"
        self.sparse = PostgresSparseIndex(db)
        self._with_sparse = with_sparse
        self.exact_reruns = 0  # candidates() statements run again without the index (bench/retrieval reports it)

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
            if self._with_sparse:
                await self.sparse.upsert_in(conn, knowledge_base_id, items)

    async def delete_by_document(self, document_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(f"DELETE FROM {self.table} WHERE document_id = %s", (document_id,))
            if self._with_sparse:
                await conn.execute(f"DELETE FROM {SPARSE_TABLE} WHERE document_id = %s", (document_id,))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        async with self._db.transaction() as conn:
            for table in (self.table, SPARSE_TABLE):
                await conn.execute(f"DELETE FROM {table} WHERE document_id = %s AND chunk_id <> ALL(%s)",
                                   (document_id, list(keep)))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(f"DELETE FROM {self.table} WHERE knowledge_base_id = %s", (knowledge_base_id,))
            if self._with_sparse:
                await conn.execute(f"DELETE FROM {SPARSE_TABLE} WHERE knowledge_base_id = %s", (knowledge_base_id,))

    async def exists(self) -> bool:
        row = await self._db.fetchone("SELECT to_regclass(%s) AS t", (self.table,))
        return bool(row and row["t"])

    async def drop(self) -> None:
        """Remove the whole table (an index generation that lost its migration)."""
        await self._db.execute(f"DROP TABLE IF EXISTS {self.table}")

    async def count_by_document(self, document_id: UUID) -> int:
        row = await self._db.fetchone(
            f"SELECT count(*) AS n FROM {self.table} WHERE document_id = %s", (document_id,)
        )
        return int(row["n"]) if row else 0

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int, *,
                     document_ids: Sequence[UUID] | None = None) -> list[VectorHit]:
        if limit <= 0 or (document_ids is not None and not document_ids):
            return []
        extra = sql.SQL(" AND document_id = ANY(%(docs)s)") if document_ids is not None else sql.SQL("")
        query = sql.SQL("SELECT chunk_id, 1 - (embedding <=> %(q)s) AS score FROM {} WHERE knowledge_base_id = %(kb)s{}"
                        " ORDER BY embedding <=> %(q)s LIMIT %(n)s").format(sql.Identifier(self.table), extra)
        params = {"q": Vector(np.asarray(vector, dtype=np.float32)), "kb": knowledge_base_id, "n": limit,
                  "docs": list(document_ids or ())}
        async with self._db.transaction() as conn:
            found, _ = await knn(conn, query, params, limit)
        hits = [VectorHit(chunk_id=r["chunk_id"], score=float(r["score"])) for r in found]
        hits.sort(key=lambda h: h.score, reverse=True)  # relaxed_order may be slightly out of order
        return hits

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None) -> tuple[list[ScoredChunk], bool]:
        """The top ``limit`` by dense and by sparse similarity (as ``mode`` needs), the filters
        applied inside each index scan, with both similarities of every candidate.

        Hybrid runs its two sides at once, each one statement on its own connection: the dense top
        with the sparse similarity of its chunks, and the sparse top with their dense similarity.
        The two index scans cost about the same; side by side they take the time of one instead of
        two (bench/retrieval, bench/RESULTS.md), and the candidates are exactly those of one
        statement doing both in turn. Dense mode reads no sparse vector at all."""
        use_dense = mode is not SearchMode.SPARSE
        use_sparse = mode is not SearchMode.DENSE and bool(query.sparse)
        if not use_dense and not use_sparse:
            return [], True
        where, params = vector_row_filter(filters)
        params |= {"q": Vector(np.asarray(query.dense, dtype=np.float32)), "kb": knowledge_base_id, "n": limit}
        if query.sparse:
            params["qs"] = as_sparsevec(query.sparse)
        sides = []
        if use_dense:
            sides.append(self._side(self._dense_side(where, bool(use_sparse)), params, limit))
        if use_sparse:
            sides.append(self._side(self._sparse_side(where), params, limit))
        found = await asyncio.gather(*sides)
        chunks: dict[UUID, ScoredChunk] = {}
        for rows, _ in found:
            for r in rows:
                if r["dense"] is not None:  # a sparse vector whose dense one is gone: not a candidate
                    chunks[r["chunk_id"]] = ScoredChunk(r["chunk_id"], float(r["dense"]), float(r["sparse"]))
        # every chunk has a dense vector: when the dense side ran short, the index has nothing more
        exhausted = found[0][1]
        return list(chunks.values()), exhausted

    async def _side(self, statement: sql.Composed, params: dict[str, Any], limit: int
                    ) -> tuple[list[dict[str, Any]], bool]:
        """One side through HNSW (iterative scan); run again exactly when it comes back short (see knn)."""
        async with self._db.transaction() as conn:
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(40, min(limit, 1000)))))
            rows = await (await conn.execute(statement, params)).fetchall()
            if len(rows) >= limit:
                return rows, False
            self.exact_reruns += 1
            await conn.execute("SET LOCAL enable_indexscan = off")
            rows = await (await conn.execute(statement, params)).fetchall()
        return rows, len(rows) < limit

    def _dense_side(self, where: sql.Composable, with_sparse: bool) -> sql.Composed:
        sparse = ("COALESCE(1 - (sp.embedding <=> %(qs)s), 0)" if with_sparse else "0")
        join = f" LEFT JOIN {SPARSE_TABLE} sp ON sp.chunk_id = d.chunk_id" if with_sparse else ""
        return sql.SQL(
            "WITH d AS MATERIALIZED (SELECT chunk_id, embedding <=> %(q)s AS distance FROM {table}"
            " WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(q)s LIMIT %(n)s)"
            " SELECT d.chunk_id, 1 - d.distance AS dense, {sparse} AS sparse FROM d{join}"
        ).format(table=sql.Identifier(self.table), where=where, sparse=sql.SQL(sparse), join=sql.SQL(join))

    def _sparse_side(self, where: sql.Composable) -> sql.Composed:
        return sql.SQL(
            "WITH s AS MATERIALIZED (SELECT chunk_id, embedding <=> %(qs)s AS distance FROM {sparse}"
            " WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(qs)s LIMIT %(n)s)"
            " SELECT s.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, 1 - s.distance AS sparse"
            " FROM s LEFT JOIN {table} v ON v.chunk_id = s.chunk_id"
        ).format(sparse=sql.Identifier(SPARSE_TABLE), table=sql.Identifier(self.table), where=where)

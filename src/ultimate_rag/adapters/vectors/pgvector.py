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
from ..postgres.sql import load_queries
from .sparse_pg import (
    HNSW,
    SPARSE_TABLE,
    PostgresSparseIndex,
    as_sparsevec,
    ef_search,
    knn,
    sparse_rows,
    sparse_upsert,
)

Q = load_queries("pgvector.sql", __package__)
_SPARSE = sql.Identifier(SPARSE_TABLE)


def _on(name: str, table: str, **parts: sql.Composable) -> sql.Composed:
    """The named query ``name`` on ``table``."""
    return sql.SQL(Q[name]).format(table=sql.Identifier(table), **parts)


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
            await conn.execute(Q["lock_table"], (self.table,))
            await conn.execute(_on("create_table", self.table, dimension=sql.Literal(int(self.dimension))))
            for name, suffix in (("create_document_index", "document"), ("create_knowledge_base_index", "kb"),
                                 ("create_hnsw_index", "hnsw")):
                await conn.execute(_on(name, self.table, index=sql.Identifier(f"{self.table}_{suffix}_idx")))

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        await self.upsert_dense_and_sparse(knowledge_base_id, items, with_sparse=self._with_sparse)

    async def upsert_dense_and_sparse(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk], *,
                                      with_sparse: bool = True) -> None:
        """The items' dense vectors and (``with_sparse``) their sparse ones: one statement, its own
        transaction."""
        if not items:
            return
        params = self._dense_rows(knowledge_base_id, items)
        if not (with_sparse and any(i.sparse for i in items)):
            await self._db.execute(_on("upsert", self.table), params)
            return
        query = _on("upsert_with_sparse", self.table, sparse_upsert=sparse_upsert(),
                    dense_upsert=_on("upsert", self.table))
        await self._db.execute(query, params | sparse_rows(items))

    @staticmethod
    def _dense_rows(knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> dict[str, Any]:
        return {"kb": knowledge_base_id, "chunk_ids": [i.chunk.id for i in items],
                "document_ids": [i.chunk.document_id for i in items],
                "embeddings": [Vector(np.asarray(i.embedding, dtype=np.float32)) for i in items]}

    async def delete_by_document(self, document_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(_on("delete_document", self.table), (document_id,))
            if self._with_sparse:
                await conn.execute(_on("delete_document", SPARSE_TABLE), (document_id,))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID], *,
                                     with_sparse: bool | None = None) -> None:
        """``with_sparse``: the sparse table's vectors of the document too (default: as the store
        was made); one statement either way."""
        if self._with_sparse if with_sparse is None else with_sparse:
            await self._db.execute(_on("delete_document_except_with_sparse", self.table, sparse=_SPARSE),
                                   {"document_id": document_id, "keep": list(keep)})
        else:
            await self._db.execute(_on("delete_document_except", self.table), (document_id, list(keep)))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(_on("delete_knowledge_base", self.table), (knowledge_base_id,))
            if self._with_sparse:
                await conn.execute(_on("delete_knowledge_base", SPARSE_TABLE), (knowledge_base_id,))

    async def exists(self) -> bool:
        row = await self._db.fetchone(Q["table_exists"], (self.table,))
        return bool(row and row["t"])

    async def drop(self) -> None:
        """Remove the whole table (an index generation that lost its migration)."""
        await self._db.execute(_on("drop_table", self.table))

    async def count_by_document(self, document_id: UUID) -> int:
        row = await self._db.fetchone(_on("count_document", self.table), (document_id,))
        return int(row["n"]) if row else 0

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int, *,
                     document_ids: Sequence[UUID] | None = None) -> list[VectorHit]:
        if limit <= 0 or (document_ids is not None and not document_ids):
            return []
        documents = sql.SQL(Q["in_documents"] if document_ids is not None else "")
        query = _on("search", self.table, documents=documents)
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

    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode) -> list[ScoredChunk]:
        """Both similarities of the named chunks (those with a dense vector here), one statement by
        primary key: the chunks the identifier stage of a search brings beside the index's top."""
        if not chunk_ids:
            return []
        with_sparse = mode is not SearchMode.DENSE and bool(query.sparse)
        params: dict[str, Any] = {"q": Vector(np.asarray(query.dense, dtype=np.float32)), "kb": knowledge_base_id,
                                  "ids": list(chunk_ids)}
        if with_sparse:
            params["qs"] = as_sparsevec(query.sparse)
        statement = _on("scored_with_sparse" if with_sparse else "scored", self.table, sparse=_SPARSE)
        rows = await self._db.fetchall(statement, params)
        return [ScoredChunk(r["chunk_id"], float(r["dense"]), float(r["sparse"])) for r in rows]

    async def _side(self, statement: sql.Composed, params: dict[str, Any], limit: int
                    ) -> tuple[list[dict[str, Any]], bool]:
        """One side through HNSW (iterative scan); run again exactly when it comes back short (see knn)."""
        async with self._db.transaction() as conn:
            await conn.execute(HNSW["iterative_scan"])
            await conn.execute(ef_search(limit))
            rows = await (await conn.execute(statement, params)).fetchall()
            if len(rows) >= limit:
                return rows, False
            self.exact_reruns += 1
            await conn.execute(HNSW["exact_scan"])
            rows = await (await conn.execute(statement, params)).fetchall()
        return rows, len(rows) < limit

    def _dense_side(self, where: sql.Composable, with_sparse: bool) -> sql.Composed:
        if with_sparse:
            return _on("dense_side_with_sparse", self.table, where=where, sparse=_SPARSE)
        return _on("dense_side", self.table, where=where)

    def _sparse_side(self, where: sql.Composable) -> sql.Composed:
        return _on("sparse_side", self.table, where=where, sparse=_SPARSE)

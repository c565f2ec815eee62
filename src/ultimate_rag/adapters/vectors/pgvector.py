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

from ...domain.lexical import LexicalShare
from ...domain.models import EmbeddedChunk, VectorHit
from ...domain.ports import CandidateSearch
from ...domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ..postgres.database import Database
from ..postgres.search_filters import vector_row_filter
from ..postgres.sql import load_queries
from .lexical_pg import LEXICAL_TABLE, lexical_rows, lexical_upsert, weights_vector
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
_LEXICAL = sql.Identifier(LEXICAL_TABLE)


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
                                      with_sparse: bool = True, share: LexicalShare | None = None) -> None:
        """The items' dense vectors and (``with_sparse``) their sparse and lexical ones and the
        revision's lexical ``share``: one statement, its own transaction."""
        if not items:
            return
        params = self._dense_rows(knowledge_base_id, items)
        if not with_sparse:
            await self._db.execute(_on("upsert", self.table), params)
            return
        query = _on("upsert_with_sparse", self.table, sparse_upsert=sparse_upsert(), lexical_upsert=lexical_upsert(),
                    dense_upsert=_on("upsert", self.table))
        await self._db.execute(query, params | sparse_rows(items) | lexical_rows(items, share))

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
                await conn.execute(_on("delete_document", LEXICAL_TABLE), (document_id,))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID], *,
                                     with_sparse: bool | None = None) -> None:
        """``with_sparse``: the sparse table's vectors of the document too (default: as the store
        was made); one statement either way."""
        if self._with_sparse if with_sparse is None else with_sparse:
            await self._db.execute(_on("delete_document_except_with_sparse", self.table, sparse=_SPARSE,
                                       lexical=_LEXICAL),
                                   {"document_id": document_id, "keep": list(keep)})
        else:
            await self._db.execute(_on("delete_document_except", self.table), (document_id, list(keep)))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(_on("delete_knowledge_base", self.table), (knowledge_base_id,))
            if self._with_sparse:
                await conn.execute(_on("delete_knowledge_base", SPARSE_TABLE), (knowledge_base_id,))
                await conn.execute(_on("delete_knowledge_base", LEXICAL_TABLE), (knowledge_base_id,))

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
        """The top ``limit`` by dense, by learned sparse and by BM25 similarity (as ``mode`` needs),
        the filters applied inside each scan, with every similarity of every candidate.

        Each side is one statement on its own connection, run at once: the dense top with the other
        similarities of its chunks, the sparse top with theirs, the BM25 top (GIN) with theirs. The
        two index scans cost about the same; side by side they take the time of one instead of two
        (bench/retrieval, bench/RESULTS.md), and the candidates are exactly those of one statement
        doing each in turn. Dense mode reads no sparse or lexical vector at all."""
        use_dense = mode is not SearchMode.SPARSE
        use_sparse = mode is not SearchMode.DENSE and bool(query.sparse)
        lexical = query.lexical if mode is not SearchMode.DENSE else None
        if not use_dense and not use_sparse and lexical is None:
            return [], True
        where, params = vector_row_filter(filters)
        params |= {"q": Vector(np.asarray(query.dense, dtype=np.float32)), "kb": knowledge_base_id, "n": limit}
        if query.sparse:
            params["qs"] = as_sparsevec(query.sparse)
        if lexical is not None:
            params |= {"ql": weights_vector(lexical.weights), "qt": list(lexical.candidates)}
        sides = []
        if use_dense:
            sides.append(self._side(self._dense_side(where, use_sparse, lexical is not None), params, limit))
        if use_sparse:
            sides.append(self._side(self._sparse_side(where, lexical is not None), params, limit))
        if lexical is not None:
            sides.append(self._lexical_side(self._lexical_statement(where, use_sparse), params))
        found = await asyncio.gather(*sides)
        chunks: dict[UUID, ScoredChunk] = {}
        for rows, _ in found:
            for r in rows:
                if r["dense"] is not None:  # a sparse or lexical vector whose dense one is gone: not a candidate
                    chunks[r["chunk_id"]] = ScoredChunk(r["chunk_id"], float(r["dense"]), float(r["sparse"]),
                                                        lexical.score(float(r["lexical"])) if lexical else 0.0)
        # every chunk has a dense vector: when the dense side ran short, the index has nothing more
        exhausted = found[0][1] if use_dense else all(done for _, done in found)
        return list(chunks.values()), exhausted

    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode) -> list[ScoredChunk]:
        """Every similarity of the named chunks (those with a dense vector here), one statement by
        primary key: the chunks the identifier stage of a search brings beside the index's top."""
        if not chunk_ids:
            return []
        with_sparse = mode is not SearchMode.DENSE and bool(query.sparse)
        lexical = query.lexical if mode is not SearchMode.DENSE else None
        params: dict[str, Any] = {"q": Vector(np.asarray(query.dense, dtype=np.float32)), "kb": knowledge_base_id,
                                  "ids": list(chunk_ids)}
        if with_sparse:
            params["qs"] = as_sparsevec(query.sparse)
        if lexical is not None:
            params["ql"] = weights_vector(lexical.weights)
        statement = _on("scored", self.table, **self._sparse_parts(with_sparse, "v"),
                        **self._lexical_parts(lexical is not None, "v"))
        rows = await self._db.fetchall(statement, params)
        return [ScoredChunk(r["chunk_id"], float(r["dense"]), float(r["sparse"]),
                            lexical.score(float(r["lexical"])) if lexical else 0.0) for r in rows]

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

    async def _lexical_side(self, statement: sql.Composed, params: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """The BM25 side: exact already (the GIN index), so a short answer is all there is."""
        rows = await self._db.fetchall(statement, params)
        return rows, len(rows) < params["n"]

    @staticmethod
    def _lexical_parts(with_lexical: bool, alias: str) -> dict[str, sql.Composable]:
        """The BM25 score of a side's candidates (a join on the lexical table), or 0."""
        if not with_lexical:
            return {"lexical": sql.SQL("0"), "lexical_join": sql.SQL("")}
        return {"lexical": sql.SQL(Q["lexical_score"]),
                "lexical_join": sql.SQL(" ") + sql.SQL(Q["lexical_join"]).format(
                    lexical_table=_LEXICAL, alias=sql.Identifier(alias))}

    @staticmethod
    def _sparse_parts(with_sparse: bool, alias: str) -> dict[str, sql.Composable]:
        """The learned sparse similarity of a side's candidates (a join on the sparse table), or 0."""
        if not with_sparse:
            return {"sparse_score": sql.SQL("0"), "sparse_join": sql.SQL("")}
        return {"sparse_score": sql.SQL(Q["sparse_score"]),
                "sparse_join": sql.SQL(" ") + sql.SQL(Q["sparse_join"]).format(sparse=_SPARSE,
                                                                             alias=sql.Identifier(alias))}

    def _dense_side(self, where: sql.Composable, with_sparse: bool, with_lexical: bool) -> sql.Composed:
        if not (with_sparse or with_lexical):
            return _on("dense_side", self.table, where=where)
        return _on("dense_side_with_others", self.table, where=where, **self._sparse_parts(with_sparse, "d"),
                   **self._lexical_parts(with_lexical, "d"))

    def _sparse_side(self, where: sql.Composable, with_lexical: bool) -> sql.Composed:
        return _on("sparse_side", self.table, where=where, sparse=_SPARSE, **self._lexical_parts(with_lexical, "s"))

    def _lexical_statement(self, where: sql.Composable, with_sparse: bool) -> sql.Composed:
        return _on("lexical_side", self.table, where=where, lexical_table=_LEXICAL,
                   **self._sparse_parts(with_sparse, "l"))

"""The sparse side of hybrid search, in PostgreSQL for every vector store (``chunk_sparse_vectors``,
pgvector ``sparsevec`` with an HNSW cosine index), and the hybrid wrapper that pairs it with a
dense store living elsewhere (Milvus, Qdrant).

Why PostgreSQL for Milvus and Qdrant too: the filters of SPEC §10 (file name, MIME type, dates,
connector, heading) are PostgreSQL columns; the sparse query applies them in SQL, and the dense
store gets them as a list of document ids inside its own query (heading, per chunk, is checked on
the dense candidates and the search over-fetches until enough survive). One sparse format, one
cache, one backfill, whatever the dense store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from pgvector import SparseVector
from psycopg import sql

from ...domain.lexical import LexicalShare
from ...domain.models import EmbeddedChunk, VectorHit
from ...domain.ports import CandidateSearch
from ...domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ..embedders.sparse import SPARSE_DIMENSION
from ..postgres.database import Connection, Database
from ..postgres.search_filters import heading_condition, matching_document_ids, vector_row_filter
from ..postgres.sql import load_queries
from .lexical_pg import PostgresLexicalIndex, lexical_rows, lexical_upsert

SPARSE_TABLE = "chunk_sparse_vectors"
HNSW = load_queries("hnsw.sql", __package__)
Q = load_queries("sparse_pg.sql", __package__)
MAX_PUSHED_DOCUMENT_IDS = 16384  # beyond this the dense store filters on the knowledge base only
MAX_DENSE_FETCH = 16384  # Milvus' largest search limit


def _query(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(Q[name]).format(sparse=sql.Identifier(SPARSE_TABLE), **parts)


def ef_search(limit: int) -> sql.Composed:
    """``hnsw.ef_search`` for a top ``limit``: at least pgvector's default (40), at most 1000."""
    return sql.SQL(HNSW["ef_search"]).format(ef_search=sql.Literal(max(40, min(int(limit), 1000))))


def as_sparsevec(vector: Mapping[int, float]) -> SparseVector:
    return SparseVector(dict(vector), SPARSE_DIMENSION)


async def knn(conn: Connection, query: sql.Composed, params: dict[str, Any],
              limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Run an ``ORDER BY distance LIMIT`` query through HNSW (iterative scan: filters apply during
    the index walk); when the index yields fewer than ``limit`` rows — a selective filter can make
    it give up after ``hnsw.max_scan_tuples`` — run it again exactly. Returns the rows and whether
    they are all there is (exhausted)."""
    await conn.execute(HNSW["iterative_scan"])
    await conn.execute(ef_search(limit))
    rows = await (await conn.execute(query, params)).fetchall()
    if len(rows) >= limit:
        return rows, False
    await conn.execute(HNSW["exact_scan"])
    rows = await (await conn.execute(query, params)).fetchall()
    await conn.execute(HNSW["index_scan"])
    return rows, len(rows) < limit


def sparse_upsert() -> sql.Composed:
    """The sparse vectors' upsert (parameters: ``kb`` and ``sparse_rows``'s)."""
    return _query("upsert")


def sparse_rows(items: Sequence[EmbeddedChunk]) -> dict[str, list[Any]]:
    """The upsert's parameters for the items that have a sparse vector."""
    written = [i for i in items if i.sparse]
    return {"sparse_chunk_ids": [i.chunk.id for i in written],
            "sparse_document_ids": [i.chunk.document_id for i in written],
            "sparse_embeddings": [as_sparsevec(i.sparse or {}) for i in written]}


class PostgresSparseIndex:
    """The learned sparse vectors, and with them the lexical ones (lexical_pg.py): written in one
    statement, removed together."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.lexical = PostgresLexicalIndex(db)

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk],
                     share: LexicalShare | None = None) -> None:
        """The items' sparse and lexical vectors and the revision's lexical ``share``: one statement."""
        if not items:
            return
        statement = _query("upsert_with_lexical", lexical_upsert=lexical_upsert(), sparse_upsert=_query("upsert"))
        await self._db.execute(statement, {"kb": knowledge_base_id, **sparse_rows(items),
                                           **lexical_rows(items, share)})

    async def publish_share(self, knowledge_base_id: UUID, share: LexicalShare) -> None:
        await self.lexical.publish_share(knowledge_base_id, share)

    async def delete_by_document(self, document_id: UUID) -> None:
        await self._db.execute(_query("delete_document"), (document_id,))
        await self.lexical.delete_by_document(document_id)

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        await self._db.execute(_query("delete_document_except"), (document_id, list(keep)))
        await self.lexical.delete_document_except(document_id, keep)

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await self._db.execute(_query("delete_knowledge_base"), (knowledge_base_id,))
        await self.lexical.delete_by_knowledge_base(knowledge_base_id)

    async def search(self, knowledge_base_id: UUID, vector: Mapping[int, float], limit: int,
                     filters: SearchFilters | None = None) -> tuple[list[tuple[UUID, float]], bool]:
        if not vector:
            return [], True
        where, params = vector_row_filter(filters)
        query = _query("search", where=where)
        async with self._db.transaction() as conn:
            rows, exhausted = await knn(conn, query, {"qs": as_sparsevec(vector), "kb": knowledge_base_id,
                                                      "n": limit, **params}, limit)
        return [(r["chunk_id"], float(r["score"])) for r in rows], exhausted

    async def scores(self, chunk_ids: Sequence[UUID], vector: Mapping[int, float]) -> dict[UUID, float]:
        if not chunk_ids or not vector:
            return {}
        rows = await self._db.fetchall(_query("scores"), (as_sparsevec(vector), list(chunk_ids)))
        return {r["chunk_id"]: float(r["score"]) for r in rows}


class HybridVectors(CandidateSearch):
    """A dense vector store outside PostgreSQL (Milvus, Qdrant) plus the PostgreSQL sparse side.
    Implements the ``VectorStore`` port (writes and deletes go to both) and ``CandidateSearch``."""

    def __init__(self, dense: Any, db: Database) -> None:
        self.dense = dense
        self.dimension = dense.dimension
        self._db = db
        self.sparse = PostgresSparseIndex(db)

    def __getattr__(self, name: str) -> Any:  # ping, aclose, collection, uri, ... of the dense store
        return getattr(self.dense, name)

    async def ensure_ready(self) -> None:
        await self.dense.ensure_ready()

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        await self.dense.upsert(knowledge_base_id, items)
        await self.sparse.upsert(knowledge_base_id, items)

    async def delete_by_document(self, document_id: UUID) -> None:
        await self.dense.delete_by_document(document_id)
        await self.sparse.delete_by_document(document_id)

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        await self.dense.delete_document_except(document_id, keep)
        await self.sparse.delete_document_except(document_id, keep)

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await self.dense.delete_by_knowledge_base(knowledge_base_id)
        await self.sparse.delete_by_knowledge_base(knowledge_base_id)

    async def count_by_document(self, document_id: UUID) -> int:
        return int(await self.dense.count_by_document(document_id))

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int,
                     **kwargs: Any) -> list[VectorHit]:
        return list(await self.dense.search(knowledge_base_id, vector, limit, **kwargs))

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None) -> tuple[list[ScoredChunk], bool]:
        """Up to ``limit`` candidates from each side (dense from the store; learned sparse and BM25
        from PostgreSQL) with every similarity, and whether the index has nothing more to give (the
        search stops over-fetching)."""
        filters = filters or SearchFilters()
        lexical = query.lexical if mode is not SearchMode.DENSE else None

        async def dense_top() -> tuple[dict[UUID, float], bool]:
            if mode is SearchMode.SPARSE:
                return {}, True
            document_ids = None
            if filters.document_level:
                document_ids = await matching_document_ids(self._db, knowledge_base_id, filters)
                if len(document_ids) > MAX_PUSHED_DOCUMENT_IDS:
                    document_ids = None  # the double filter applies the filters; the search over-fetches
            return await self._dense(knowledge_base_id, query, limit, document_ids, filters)

        async def sparse_top() -> tuple[list[tuple[UUID, float]], bool]:
            if mode is SearchMode.DENSE:
                return [], True
            return await self.sparse.search(knowledge_base_id, query.sparse, limit, filters)

        async def lexical_top() -> tuple[list[tuple[UUID, float]], bool]:
            if lexical is None:
                return [], True
            return await self.sparse.lexical.search(knowledge_base_id, lexical, limit, filters)

        # the sides at once: the dense store and PostgreSQL answer side by side
        (dense, exhausted), (found, sparse_done), (terms, lexical_done) = await asyncio.gather(
            dense_top(), sparse_top(), lexical_top())
        sparse, bm25 = dict(found), dict(terms)
        if mode is SearchMode.SPARSE:
            exhausted = sparse_done and lexical_done
        elif mode is SearchMode.HYBRID:
            exhausted = exhausted and sparse_done and lexical_done
        ids = dense.keys() | sparse.keys() | bm25.keys()
        if mode is not SearchMode.DENSE:
            sparse |= await self.sparse.scores([c for c in ids if c not in sparse], query.sparse)
        if lexical is not None:
            bm25 |= await self.sparse.lexical.scores([c for c in ids if c not in bm25], lexical)
        floor = min(dense.values(), default=0.0)  # not in the dense top: at most the lowest dense score there
        return [ScoredChunk(c, dense.get(c, floor), sparse.get(c, 0.0), bm25.get(c, 0.0)) for c in ids], exhausted

    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode) -> list[ScoredChunk]:
        """Both similarities of the named chunks: the dense store's by id, the sparse side's by
        primary key in PostgreSQL, asked at once. A chunk the dense store does not hold for this
        knowledge base is left out, in every mode (as ``candidates`` would never propose it)."""
        if not chunk_ids:
            return []

        async def dense() -> dict[UUID, float]:
            return {h.chunk_id: h.score for h in await self.dense.similarities(knowledge_base_id, query.dense,
                                                                                 chunk_ids)}

        async def sparse() -> dict[UUID, float]:
            return {} if mode is SearchMode.DENSE else await self.sparse.scores(chunk_ids, query.sparse)

        async def lexical() -> dict[UUID, float]:
            if mode is SearchMode.DENSE or query.lexical is None:
                return {}
            return await self.sparse.lexical.scores(chunk_ids, query.lexical)

        dense_of, sparse_of, lexical_of = await asyncio.gather(dense(), sparse(), lexical())
        return [ScoredChunk(c, score, sparse_of.get(c, 0.0), lexical_of.get(c, 0.0)) for c, score in dense_of.items()]

    async def _dense(self, knowledge_base_id: UUID, query: QueryVectors, limit: int,
                     document_ids: list[UUID] | None, filters: SearchFilters) -> tuple[dict[UUID, float], bool]:
        """The dense top ``limit``; a heading filter (per chunk, unknown to the dense store) is checked
        in PostgreSQL, over-fetching until ``limit`` chunks pass or the store has no more."""
        fetch = limit
        while True:
            hits = await self.dense.search(knowledge_base_id, query.dense, fetch, document_ids=document_ids)
            exhausted = len(hits) < fetch
            dense = {h.chunk_id: h.score for h in hits}
            if filters.heading is None or not dense:
                return dense, exhausted
            keep = await self._with_heading(list(dense), filters)
            dense = {k: v for k, v in dense.items() if k in keep}
            if len(dense) >= limit or exhausted or fetch >= MAX_DENSE_FETCH:
                top = sorted(dense.items(), key=lambda kv: -kv[1])[:limit]
                return dict(top), exhausted and len(dense) <= limit
            fetch = min(fetch * 4, MAX_DENSE_FETCH)

    async def _with_heading(self, chunk_ids: list[UUID], filters: SearchFilters) -> set[UUID]:
        conds, params = heading_condition(filters)
        rows = await self._db.fetchall(_query("chunks_with_heading", heading=conds[0]), {"ids": chunk_ids, **params})
        return {r["id"] for r in rows}

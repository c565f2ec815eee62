"""pgvector in the same PostgreSQL: one table per embedding dimension, HNSW with cosine distance.
The learned sparse vectors sit beside them (``chunk_sparse_vectors``): a hybrid search is one SQL
query — the dense top and the sparse top, each filtered inside its index scan, then both
similarities of every candidate — and the search service fuses them.

Knowledge-base filtering uses ``hnsw.iterative_scan`` (pgvector >= 0.8): without it a filtered
HNSW query can return too few rows, or none after deletes, because the filter is applied after
the first ``ef_search`` candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np
from pgvector import Vector
from psycopg import sql

from ...domain.models import EmbeddedChunk, VectorHit
from ...domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ..postgres.database import Database
from ..postgres.search_filters import vector_row_filter
from .sparse_pg import SPARSE_TABLE, PostgresSparseIndex, as_sparsevec, knn


class PgVectorStore:
    def __init__(self, db: Database, dimension: int) -> None:
        self._db = db
        self.dimension = dimension
        self.table = f"chunk_vectors_{int(dimension)}"
        self.sparse = PostgresSparseIndex(db)
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
            await self.sparse.upsert_in(conn, knowledge_base_id, items)

    async def delete_by_document(self, document_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(f"DELETE FROM {self.table} WHERE document_id = %s", (document_id,))
            await conn.execute(f"DELETE FROM {SPARSE_TABLE} WHERE document_id = %s", (document_id,))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        async with self._db.transaction() as conn:
            for table in (self.table, SPARSE_TABLE):
                await conn.execute(f"DELETE FROM {table} WHERE document_id = %s AND chunk_id <> ALL(%s)",
                                   (document_id, list(keep)))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(f"DELETE FROM {self.table} WHERE knowledge_base_id = %s", (knowledge_base_id,))
            await conn.execute(f"DELETE FROM {SPARSE_TABLE} WHERE knowledge_base_id = %s", (knowledge_base_id,))

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
        """One query: the top ``limit`` by dense and by sparse similarity (as ``mode`` needs), the
        filters applied inside both index scans, then both similarities of each candidate."""
        where, params = vector_row_filter(filters)
        use_dense = mode is not SearchMode.SPARSE
        use_sparse = mode is not SearchMode.DENSE and bool(query.sparse)
        if not use_dense and not use_sparse:
            return [], True
        table, sparse_table = sql.Identifier(self.table), sql.Identifier(SPARSE_TABLE)
        sides = []
        if use_dense:
            sides.append(sql.SQL("d AS MATERIALIZED (SELECT chunk_id FROM {} WHERE knowledge_base_id = %(kb)s{}"
                                 " ORDER BY embedding <=> %(q)s LIMIT %(n)s)").format(table, where))
        if use_sparse:
            sides.append(sql.SQL("s AS MATERIALIZED (SELECT chunk_id FROM {} WHERE knowledge_base_id = %(kb)s{}"
                                 " ORDER BY embedding <=> %(qs)s LIMIT %(n)s)").format(sparse_table, where))
        union = " UNION ".join(f"SELECT chunk_id FROM {side}" for side, used in (("d", use_dense), ("s", use_sparse))
                               if used)
        counts = ", ".join(f"(SELECT count(*) FROM {side}) AS n_{side}" if used else f"%(n)s AS n_{side}"
                           for side, used in (("d", use_dense), ("s", use_sparse)))
        sparse_score = "COALESCE(1 - (sp.embedding <=> %(qs)s), 0)" if query.sparse else "0"
        statement = sql.SQL(
            "WITH {sides}, u AS ({union})"
            " SELECT u.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, {sparse_score} AS sparse, {counts}"
            " FROM u JOIN {table} v ON v.chunk_id = u.chunk_id LEFT JOIN {sparse_table} sp ON sp.chunk_id = u.chunk_id"
        ).format(sides=sql.SQL(", ").join(sides), union=sql.SQL(union), sparse_score=sql.SQL(sparse_score),
                 counts=sql.SQL(counts), table=table, sparse_table=sparse_table)
        params |= {"q": Vector(np.asarray(query.dense, dtype=np.float32)), "kb": knowledge_base_id, "n": limit}
        if query.sparse:
            params["qs"] = as_sparsevec(query.sparse)
        async with self._db.transaction() as conn:
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(40, min(limit, 1000)))))
            rows = await (await conn.execute(statement, params)).fetchall()
            full = bool(rows) and min(rows[0]["n_d"], rows[0]["n_s"]) >= limit
            if not full:  # a side came back short: the index gave up on a selective filter, or that is all
                self.exact_reruns += 1
                await conn.execute("SET LOCAL enable_indexscan = off")
                rows = await (await conn.execute(statement, params)).fetchall()
        exhausted = not rows or min(rows[0]["n_d"], rows[0]["n_s"]) < limit
        return [ScoredChunk(r["chunk_id"], float(r["dense"]), float(r["sparse"])) for r in rows], exhausted

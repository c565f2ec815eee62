"""BM25 in PostgreSQL, for every vector store (docs/search.md): each chunk's BM25 weights as a
pgvector ``sparsevec`` over hashed term indexes beside an ``int4[]`` of those indexes under GIN
(``chunk_lexical_vectors``), and each knowledge base's document frequencies, the sum of its
published revisions' shares (migration 0022's trigger keeps it).

Why here and not the stores' own BM25 (Milvus' analyzers, Qdrant's IDF modifier): the filters of
SPEC §10 are PostgreSQL columns, the searchable rule is PostgreSQL's, and the learned sparse side
already lives here for all three stores; one tokenizer (CJK bigrams) and one set of statistics
serve them all, written in the statement that writes the sparse vectors. The inverted index is
exact (GIN), unlike an HNSW walk over sparse vectors that are mostly orthogonal to a short query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from pgvector import SparseVector
from psycopg import sql

from ...domain.lexical import BIGRAMS, LEXICAL_DIMENSION, LexicalQuery, LexicalShare
from ...domain.models import EmbeddedChunk
from ...domain.search import SearchFilters
from ..postgres.database import Database
from ..postgres.search_filters import vector_row_filter
from ..postgres.sql import load_queries

Q = load_queries("lexical_pg.sql", __package__)
LEXICAL_TABLE = "chunk_lexical_vectors"


def share_params(share: LexicalShare) -> dict[str, Any]:
    terms = sorted(share.frequencies)
    return {"terms": terms, "counts": [share.frequencies[t] for t in terms], "chunks": share.chunks}


def weights_vector(weights: dict[int, float] | Any) -> SparseVector:
    return SparseVector(dict(weights), LEXICAL_DIMENSION)


def lexical_upsert() -> sql.Composed:
    """Two CTEs (``lexical``, ``lexical_share``) for a statement's WITH list: the chunks' lexical
    vectors and the revision's share (parameters: ``kb`` and ``lexical_rows``')."""
    return sql.Composed([sql.SQL(Q["upsert"])])


def lexical_rows(items: Sequence[EmbeddedChunk], share: LexicalShare | None) -> dict[str, Any]:
    written = [i for i in items if i.lexical is not None and i.lexical.weights]
    params: dict[str, Any] = {
        "lex_chunk_ids": [i.chunk.id for i in written], "lex_document_ids": [i.chunk.document_id for i in written],
        "lex_terms": [",".join(map(str, i.lexical.indexes)) for i in written if i.lexical is not None],
        "lex_weights": [weights_vector(i.lexical.weights) for i in written if i.lexical is not None],
        "lex_share_document": None, "lex_share_revision": None, "lex_share_chunks": None,
        "lex_share_terms": None, "lex_share_counts": None}
    if share is not None:
        values = share_params(share)
        params |= {"lex_share_document": share.document_id, "lex_share_revision": share.revision,
                   "lex_share_chunks": values["chunks"], "lex_share_terms": values["terms"],
                   "lex_share_counts": values["counts"]}
    return params


class PostgresLexicalIndex:
    """The lexical index's reads (candidates, scores, statistics) and its deletes; its writes are
    composed into the sparse vectors' statement (``lexical_upsert``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def statistics(self, knowledge_base_id: UUID, indexes: Sequence[int]) -> tuple[int, dict[int, int]]:
        """The knowledge base's published chunk count and the document frequency of each of ``indexes``."""
        row = await self._db.fetchone(Q["statistics"], {"kb": knowledge_base_id, "terms": list(indexes)})
        if row is None:
            return 0, {}
        return int(row["chunks"] or 0), {int(t): int(d) for t, d in zip(row["terms"], row["dfs"], strict=True)}

    async def korean_terms(self, knowledge_base_id: UUID) -> str:
        """How the knowledge base cuts Korean (``bigrams`` when it is gone: nothing to match)."""
        row = await self._db.fetchone(Q["korean_terms"], {"kb": knowledge_base_id})
        return str(row["korean_terms"]) if row is not None else BIGRAMS

    async def search(self, knowledge_base_id: UUID, query: LexicalQuery, limit: int,
                     filters: SearchFilters | None = None) -> tuple[list[tuple[UUID, float]], bool]:
        """The top ``limit`` chunks by BM25 (normalised, ``LexicalQuery.score``) among those holding
        a candidate term, the filters applied in the statement; and whether there are no more."""
        where, params = vector_row_filter(filters)
        statement = sql.SQL(Q["search"]).format(where=where)
        rows = await self._db.fetchall(statement, params | {
            "kb": knowledge_base_id, "qt": list(query.candidates), "ql": weights_vector(query.weights), "n": limit})
        return [(r["chunk_id"], query.score(float(r["score"]))) for r in rows], len(rows) < limit

    async def scores(self, chunk_ids: Sequence[UUID], query: LexicalQuery) -> dict[UUID, float]:
        if not chunk_ids:
            return {}
        rows = await self._db.fetchall(Q["scores"], {"ids": list(chunk_ids), "ql": weights_vector(query.weights)})
        return {r["chunk_id"]: query.score(float(r["score"])) for r in rows}

    async def publish_share(self, knowledge_base_id: UUID, share: LexicalShare) -> None:
        """A published revision's share written and added at once (the backfill; no-op when the
        revision is no longer the published one or has its share)."""
        await self._db.execute(Q["publish_share"], {"kb": knowledge_base_id, "document_id": share.document_id,
                                                    "revision": share.revision, **share_params(share)})

    async def delete_by_document(self, document_id: UUID) -> None:
        await self._db.execute(Q["delete_document"], (document_id,))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        await self._db.execute(Q["delete_document_except"], (document_id, list(keep)))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await self._db.execute(Q["delete_knowledge_base"], (knowledge_base_id,))

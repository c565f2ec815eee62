"""Search (SPEC §10): embed the query, ask the vector store for candidates in the knowledge base,
then keep only chunks whose document PostgreSQL says is READY — even if a crashed worker left
vectors behind (the double filter). Over-fetches until top_k READY results or the index is exhausted."""

from __future__ import annotations

from uuid import UUID

from ..adapters.postgres.documents import DocumentRepository
from ..domain.errors import InvalidRequestError
from ..domain.models import SearchResult, SourceLocator
from ..domain.ports import Embedder, VectorStore


class SearchService:
    def __init__(self, *, embedder: Embedder, vectors: VectorStore, documents: DocumentRepository,
                 max_top_k: int, max_query_chars: int) -> None:
        self._embedder = embedder
        self._vectors = vectors
        self._documents = documents
        self._max_top_k = max_top_k
        self._max_query_chars = max_query_chars

    async def search(self, knowledge_base_id: UUID, query: str, top_k: int) -> list[SearchResult]:
        query = query.strip()
        if not query:
            raise InvalidRequestError("the query is empty")
        if len(query) > self._max_query_chars:
            raise InvalidRequestError(f"the query is longer than {self._max_query_chars} characters")
        if not 1 <= top_k <= self._max_top_k:
            raise InvalidRequestError(f"top_k must be between 1 and {self._max_top_k}")
        vector = await self._embedder.embed_query(query)
        fetch = top_k * 2
        while True:
            hits = await self._vectors.search(knowledge_base_id, vector, fetch)
            rows = await self._documents.ready_chunks(knowledge_base_id, [h.chunk_id for h in hits])
            if len(rows) >= top_k or len(hits) < fetch or fetch >= 4096:
                break
            fetch *= 4
        by_id = {r["id"]: r for r in rows}
        results = []
        for hit in hits:
            row = by_id.get(hit.chunk_id)
            if row is None:
                continue
            results.append(SearchResult(
                chunk_id=hit.chunk_id, document_id=row["document_id"], filename=row["filename"],
                content=row["content"], score=hit.score, heading_path=tuple(row["heading_path"] or ()),
                locator=SourceLocator.from_metadata(row["locator"]),
                assets=tuple(row["metadata"].get("assets", ())) if row["metadata"] else (),
            ))
            if len(results) == top_k:
                break
        return results

"""What search and answers read besides the vectors: the chunks PostgreSQL says are searchable
(the double filter), the identifier index beside them, the knowledge base's BM25 statistics, the
optional reranker, and where search reports its timings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from ..identifiers import IdentifierHits
from ..search import SearchFilters


class ReadyChunks(Protocol):
    async def ready_chunks(self, knowledge_base_id: UUID, chunk_ids: list[UUID],
                           filters: SearchFilters) -> list[dict[str, Any]]:
        """The rows of those chunks that belong to their document's published revision and pass
        the filters (id, document_id, filename, content, heading_path, locator, metadata,
        identifiers: the chunk's identifier keys, None where not computed yet)."""
        ...


class IdentifierIndex(Protocol):
    async def lookup(self, knowledge_base_id: UUID, keys: Sequence[str], filters: SearchFilters,
                     limit: int) -> IdentifierHits:
        """Which of ``keys`` some searchable chunk of the knowledge base passing ``filters`` holds,
        and up to ``limit`` such chunks per key — through the index of the chunks' identifier
        keys, never a scan of their contents."""
        ...


class SearchTimings(Protocol):
    def observe(self, mode: str, seconds: float) -> None: ...


class LexicalStatistics(Protocol):
    async def statistics(self, knowledge_base_id: UUID, indexes: Sequence[int]) -> tuple[int, dict[int, int]]:
        """The knowledge base's published chunk count and the document frequency (in chunks) of each
        of the term ``indexes`` (domain/lexical.py) that occurs at all."""
        ...

    async def korean_terms(self, knowledge_base_id: UUID) -> str:
        """How the knowledge base cuts Korean text into terms (``KnowledgeBaseSettings.korean_terms``)."""
        ...


class Reranker(Protocol):
    """A cross-encoder: each document's relevance to the query, in the documents' order. Fails with
    ``ProviderError`` (``ProviderTimeoutError`` when it does not answer in time)."""

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]: ...

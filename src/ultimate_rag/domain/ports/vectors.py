"""The vector index. Adapters implement ``VectorStore`` (one index); the index generations router
(``adapters/vectors/generations.py``) implements ``IndexRouter`` on top of them, and it is the only
vector store the services see: every write goes to the generations a knowledge base's plan names,
every delete to each live one, every search to the generation of the plan it read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable
from uuid import UUID

from ..embedding_models import Generation, IndexPlan
from ..lexical import LexicalShare
from ..models import EmbeddedChunk, IndexState, VectorHit
from ..search import QueryVectors, ScoredChunk, SearchFilters, SearchMode


@runtime_checkable
class VectorStore(Protocol):
    """Vectors keyed by chunk id, filterable by knowledge base. Search results are candidates only:
    the search service keeps the chunks of published revisions as PostgreSQL records them (double filter)."""

    dimension: int

    async def ensure_ready(self) -> None: ...
    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None: ...
    async def delete_by_document(self, document_id: UUID) -> None: ...
    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        """The document's vectors other than ``keep`` (its published revision's chunks): what a
        revision swap, a failed rebuild or the janitor removes."""
    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None: ...
    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int) -> list[VectorHit]: ...
    async def count_by_document(self, document_id: UUID) -> int: ...


@runtime_checkable
class CandidateSearch(Protocol):
    """A vector store that gives a search its candidates itself: the top ``limit`` by dense and by
    sparse similarity (as ``mode`` needs), the filters applied inside the index, both similarities
    of every candidate, and whether the index has nothing more to give (the search stops
    over-fetching). pgvector offers it, and Milvus or Qdrant through ``HybridVectors``."""

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None) -> tuple[list[ScoredChunk], bool]: ...
    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode) -> list[ScoredChunk]:
        """Both similarities of the named chunks (those with a vector in this index): the chunks a
        search names rather than finds (the identifier stage)."""
        ...


class IndexRouter(VectorStore, Protocol):
    """Each knowledge base's vectors by index generation (domain/embedding_models.py): its plan
    (the current generation and, while an embedding-model migration runs, the one being built),
    writes per generation, and candidates from the generation of a plan read before (which raises
    ``GenerationGone`` when a migration's switch dropped it meanwhile: read the plan again)."""

    async def plan(self, knowledge_base_id: UUID, /) -> IndexPlan: ...
    def plan_from(self, knowledge_base_id: UUID, state: IndexState, /) -> IndexPlan:
        """``plan`` from the knowledge base's index state read already (no read)."""
        ...
    async def write(self, knowledge_base_id: UUID,
                    items_by_generation: Sequence[tuple[Generation, Sequence[EmbeddedChunk]]], /,
                    share: LexicalShare | None = None) -> None:
        """Each generation's vectors (the current one's with the learned sparse and lexical ones) and
        the revision's lexical ``share``, added to the statistics when the revision is published."""
        ...
    async def remove_superseded(self, knowledge_base_id: UUID, document_id: UUID, keep: Sequence[UUID],
                                generations: Sequence[Generation], /) -> None:
        """The document's vectors in each of ``generations`` but those of ``keep``."""
        ...
    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None,
                         plan: IndexPlan | None = None) -> tuple[list[ScoredChunk], bool]: ...
    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode, plan: IndexPlan | None = None) -> list[ScoredChunk]: ...


class GenerationAdmin(Protocol):
    """What an embedding-model migration does to index generations beyond writing them: make the
    new one, find it (None once dropped), drop one, and list or drop those nothing uses."""

    async def create(self, knowledge_base_id: UUID, generation: Generation) -> None: ...
    async def existing(self, knowledge_base_id: UUID, generation: Generation) -> VectorStore | None: ...
    async def drop_generation(self, knowledge_base_id: UUID, generation: Generation) -> None: ...
    async def generation_names(self) -> list[str]: ...
    def generation_of(self, name: str) -> tuple[UUID, int]:
        """(knowledge base, generation number) of a generation's table or collection name."""
        ...
    async def drop_named(self, name: str) -> None: ...

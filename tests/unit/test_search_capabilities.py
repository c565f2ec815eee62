"""What the search service asks of its vector store (domain/ports.py): a store that is a
``CandidateSearch`` gives the candidates with both similarities, one that is a
``PlannedCandidateSearch`` gives them from the generation of the plan the search read, and any other
store answers dense ``search`` alone. In-memory stores stand in for the real ones so that each
capability can be offered alone; the real stores run in tests/integration/test_search*.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid4

from ultimate_rag.adapters.vectors.generations import IndexGenerations
from ultimate_rag.adapters.vectors.milvus import MilvusVectorStore
from ultimate_rag.adapters.vectors.pgvector import PgVectorStore
from ultimate_rag.adapters.vectors.qdrant import QdrantVectorStore
from ultimate_rag.adapters.vectors.sparse_pg import HybridVectors
from ultimate_rag.domain.embedding_models import EmbeddingSpec, Generation, IndexPlan
from ultimate_rag.domain.models import EmbeddedChunk, VectorHit
from ultimate_rag.domain.ports import CandidateSearch, PlannedCandidateSearch
from ultimate_rag.domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ultimate_rag.services.search import SearchService

KB, DOC, CHUNK = uuid4(), uuid4(), uuid4()
SPEC = EmbeddingSpec("openai", "other-model", 3)


class Embedder:
    dimension = 3
    max_tokens = 512

    def __init__(self, name: str) -> None:
        self.name = name
        self.queries: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [1.0, 0.0, 0.0]


class DenseStore:
    """The VectorStore port and nothing more."""

    dimension = 3

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def ensure_ready(self) -> None: ...
    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None: ...
    async def delete_by_document(self, document_id: UUID) -> None: ...
    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None: ...
    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None: ...

    async def count_by_document(self, document_id: UUID) -> int:
        return 1

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int) -> list[VectorHit]:
        self.calls.append(("search", limit))
        return [VectorHit(CHUNK, 0.9)]


class CandidateStore(DenseStore, CandidateSearch):
    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None) -> tuple[list[ScoredChunk], bool]:
        self.calls.append(("candidates", mode, filters))
        return [ScoredChunk(CHUNK, 0.8, 0.0)], True


class PlannedStore(DenseStore, PlannedCandidateSearch):
    def __init__(self) -> None:
        super().__init__()
        self.index_plan = IndexPlan(KB, Generation(SPEC, 2))

    async def plan(self, knowledge_base_id: UUID) -> IndexPlan:
        self.calls.append(("plan", knowledge_base_id))
        return self.index_plan

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None,
                         plan: IndexPlan | None = None) -> tuple[list[ScoredChunk], bool]:
        self.calls.append(("candidates", mode, filters, plan))
        return [ScoredChunk(CHUNK, 0.7, 0.0)], True


class ReadyChunks:
    """PostgreSQL's side of the double filter: the one chunk is READY."""

    async def ready_chunks(self, knowledge_base_id: UUID, chunk_ids: list[UUID],
                           filters: SearchFilters) -> list[dict[str, Any]]:
        return [{"id": CHUNK, "document_id": DOC, "filename": "a.txt", "content": "the answer", "heading_path": [],
                 "locator": {}, "metadata": {}} for c in chunk_ids if c == CHUNK]


class Models:
    """EmbeddingModels: the embedder of a generation's model."""

    def __init__(self) -> None:
        self.other = Embedder(SPEC.model)
        self.asked: list[EmbeddingSpec] = []

    def embedder(self, spec: EmbeddingSpec) -> Embedder:
        self.asked.append(spec)
        return self.other


def service(store: DenseStore, models: Models | None = None) -> tuple[SearchService, Embedder]:
    embedder = Embedder("default-model")
    documents: Any = ReadyChunks()
    return SearchService(embedder=embedder, vectors=store, documents=documents, max_top_k=10, max_query_chars=100,
                         models=models), embedder


def test_the_real_stores_offer_what_they_implement() -> None:
    assert issubclass(PgVectorStore, CandidateSearch) and issubclass(HybridVectors, CandidateSearch)
    assert issubclass(IndexGenerations, PlannedCandidateSearch)
    assert not issubclass(PgVectorStore, PlannedCandidateSearch)
    # Milvus and Qdrant hold dense vectors only: HybridVectors puts them beside the sparse side
    assert not issubclass(MilvusVectorStore, CandidateSearch) and not issubclass(QdrantVectorStore, CandidateSearch)


async def test_a_store_without_candidates_answers_a_dense_search() -> None:
    store = DenseStore()
    search, _ = service(store)
    [hit] = await search.search(KB, "answer", 3)
    assert (hit.chunk_id, hit.score) == (CHUNK, 0.9)
    assert store.calls == [("search", 50)]


async def test_a_candidate_search_gives_the_candidates_with_the_filters() -> None:
    store = CandidateStore()
    search, _ = service(store)
    filters = SearchFilters(filename="*.txt")
    [hit] = await search.search(KB, "answer", 3, mode=SearchMode.DENSE, filters=filters)
    assert hit.dense_score == 0.8
    assert store.calls == [("candidates", SearchMode.DENSE, filters)]


async def test_a_planned_search_reads_the_plan_once_and_asks_its_generation_with_its_model() -> None:
    store, models = PlannedStore(), Models()
    search, default = service(store, models)
    [hit] = await search.search(KB, "answer", 3)
    assert hit.dense_score == 0.7
    assert store.calls == [("plan", KB), ("candidates", SearchMode.DENSE, SearchFilters(), store.index_plan)]
    assert models.asked == [SPEC] and models.other.queries == ["answer"] and default.queries == []


async def test_without_the_models_a_planned_store_gives_plain_candidates() -> None:
    store = PlannedStore()
    search, default = service(store)
    await search.search(KB, "answer", 3)
    assert store.calls == [("candidates", SearchMode.DENSE, SearchFilters(), None)]
    assert default.queries == ["answer"]

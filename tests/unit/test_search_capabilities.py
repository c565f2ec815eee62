"""What the search service asks of its one vector store, the index generations router
(``ports.IndexRouter``): the knowledge base's plan, read once per search, then candidates from the
generation that plan names, with the query embedded by that generation's own model. In-memory
stand-ins replace the router and the models (the real router runs in tests/integration/test_search*.py
and test_embedding_migration*.py); the vector stores behind the router offer ``CandidateSearch``."""

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
from ultimate_rag.domain.errors import GenerationGone
from ultimate_rag.domain.lexical import LexicalShare
from ultimate_rag.domain.models import EmbeddedChunk, IndexState, VectorHit
from ultimate_rag.domain.ports import CandidateSearch, GenerationAdmin, IndexRouter
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


class Router:
    """``ports.IndexRouter``: one plan; ``gone`` candidates calls raise ``GenerationGone`` first."""

    dimension = 3

    def __init__(self, gone: int = 0, found: Sequence[ScoredChunk] = (ScoredChunk(CHUNK, 0.7, 0.0),),
                 named: Sequence[ScoredChunk] = ()) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.index_plan = IndexPlan(KB, Generation(SPEC, 2))
        self.gone = gone
        self.found = list(found)  # what the index's top holds
        self.named = {c.chunk_id: c for c in named}  # what scored() knows besides

    async def ensure_ready(self) -> None: ...
    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None: ...
    async def delete_by_document(self, document_id: UUID) -> None: ...
    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None: ...
    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None: ...

    async def count_by_document(self, document_id: UUID) -> int:
        return 1

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int) -> list[VectorHit]:
        raise AssertionError("search asks for candidates, never a dense-only search")

    async def plan(self, knowledge_base_id: UUID) -> IndexPlan:
        self.calls.append(("plan", knowledge_base_id))
        return self.index_plan

    def plan_from(self, knowledge_base_id: UUID, state: IndexState) -> IndexPlan:
        return self.index_plan

    async def write(self, knowledge_base_id: UUID,
                    items_by_generation: Sequence[tuple[Generation, Sequence[EmbeddedChunk]]],
                    share: LexicalShare | None = None) -> None: ...

    async def remove_superseded(self, knowledge_base_id: UUID, document_id: UUID, keep: Sequence[UUID],
                                generations: Sequence[Generation]) -> None: ...

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None,
                         plan: IndexPlan | None = None) -> tuple[list[ScoredChunk], bool]:
        self.calls.append(("candidates", mode, filters, plan))
        if self.gone:
            self.gone -= 1
            raise GenerationGone("switched")
        return list(self.found), True

    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode, plan: IndexPlan | None = None) -> list[ScoredChunk]:
        self.calls.append(("scored", mode, tuple(chunk_ids), plan))
        known = {c.chunk_id: c for c in [*self.found, *self.named.values()]}
        return [known[c] for c in chunk_ids if c in known]


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


def service(router: Router, models: Models) -> SearchService:
    stand_in: Any = models  # EmbeddingModels' one method search calls
    return SearchService(vectors=router, models=stand_in, documents=ReadyChunks(), max_top_k=10, max_query_chars=100)


def test_the_real_stores_offer_what_they_implement() -> None:
    assert issubclass(PgVectorStore, CandidateSearch) and issubclass(HybridVectors, CandidateSearch)
    # Milvus and Qdrant hold dense vectors only: HybridVectors puts them beside the sparse side
    assert not issubclass(MilvusVectorStore, CandidateSearch) and not issubclass(QdrantVectorStore, CandidateSearch)
    ports: tuple[type[IndexRouter], type[GenerationAdmin]] = (IndexGenerations, IndexGenerations)  # checked by mypy
    assert all(hasattr(IndexGenerations, name) for name in ("plan", "write", "candidates", "create", "generation_of"))
    assert ports


async def test_a_search_reads_the_plan_once_and_asks_its_generation_with_its_model() -> None:
    router, models = Router(), Models()
    filters = SearchFilters(filename="*.txt")
    [hit] = await service(router, models).search(KB, "answer", 3, mode=SearchMode.DENSE, filters=filters)
    assert hit.dense_score == 0.7
    assert router.calls == [("plan", KB), ("candidates", SearchMode.DENSE, filters, router.index_plan)]
    assert models.asked == [SPEC] and models.other.queries == ["answer"]


async def test_a_generation_dropped_meanwhile_makes_the_search_read_the_plan_again() -> None:
    router, models = Router(gone=1), Models()
    [hit] = await service(router, models).search(KB, "answer", 3)
    assert hit.chunk_id == CHUNK
    assert [c[0] for c in router.calls] == ["plan", "candidates", "plan", "candidates"]

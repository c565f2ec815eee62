"""Each knowledge base's embedding model (SPEC §3): an embedder per model, built once per process
and shared by the worker, search, answers and dedup; the embedding service in front of it (the
cache keys on the model's name, so vectors of two models never mix); and where the knowledge
base's vectors go right now (its current index generation and, during a migration, the new one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from ...domain.embedding_models import EmbeddingSpec, Generation, IndexPlan, spec_of, validate_spec
from ...domain.errors import PermanentError
from ...domain.models import IndexState, KnowledgeBaseSettings
from ...domain.ports import IndexStateReader, StreamingEmbedder
from .passages import EmbeddingService


class EmbeddingModels:
    def __init__(self, *, default: EmbeddingService, local: EmbeddingSpec,
                 make_embedder: Callable[[EmbeddingSpec], StreamingEmbedder],
                 make_service: Callable[[StreamingEmbedder], EmbeddingService],
                 openai_configured: bool, max_dimension: int, states: IndexStateReader | None = None) -> None:
        """``states``: each knowledge base's index state (None: every knowledge base reads the
        default model's first generation, as before migrations existed)."""
        embedder = default.embedder
        self.local = local
        self.default = local if embedder.name == local.model else EmbeddingSpec(
            "openai", embedder.name, embedder.dimension)
        self._make_embedder = make_embedder
        self._make_service = make_service
        self.openai_configured = openai_configured
        self.max_dimension = max_dimension
        self._states = states
        self._services: dict[tuple[str, str, int], EmbeddingService] = {self.default.key: default}

    def spec_of(self, settings: KnowledgeBaseSettings | dict[str, Any] | None) -> EmbeddingSpec:
        if not isinstance(settings, KnowledgeBaseSettings):
            settings = KnowledgeBaseSettings.from_dict(settings)
        return spec_of(settings, self.default, self.local.model)

    def validate(self, embedder: str, model: str | None, dimension: int | None) -> EmbeddingSpec:
        return validate_spec(embedder, model, dimension, local=self.local, openai_configured=self.openai_configured,
                             max_dimension=self.max_dimension)

    def requested(self, embedder: str | None, model: str | None, dimension: int | None) -> EmbeddingSpec:
        """The model a new knowledge base asked for (422 when it cannot be used), or the default."""
        return self.default if embedder is None else self.validate(embedder, model, dimension)

    def embedding(self, spec: EmbeddingSpec) -> EmbeddingService:
        """The embedding service of ``spec`` (one embedder per model per process)."""
        service = self._services.get(spec.key)
        if service is None:
            if spec.embedder == "openai" and not self.openai_configured:
                raise PermanentError(f"this knowledge base embeds with {spec.model} on an OpenAI-compatible server, "
                                     "but ULTIMATE_RAG_EMBEDDING_BASE_URL is not set here")
            if spec.embedder == "local" and spec.key != self.local.key:
                raise PermanentError(f"unknown local embedding model {spec.model}")
            service = self._services[spec.key] = self._make_service(self._make_embedder(spec))
        return service

    def embedder(self, spec: EmbeddingSpec) -> StreamingEmbedder:
        return self.embedding(spec).embedder

    def services(self) -> list[EmbeddingService]:
        return list(self._services.values())

    async def read_plan(self, kb_id: UUID) -> IndexPlan | None:
        """The knowledge base's current generation and its running migration's target (one read)."""
        if self._states is None:
            return None
        state = await self._states.index_state(kb_id)
        return None if state is None else self.plan_of(kb_id, state)

    def plan_of(self, kb_id: UUID, state: IndexState) -> IndexPlan | None:
        """``read_plan``'s answer from a read made already (the pipeline's document carries it)."""
        if self._states is None:
            return None
        current = self.current_generation(state.settings)
        if not state.migration_target:
            return IndexPlan(kb_id, current)
        return IndexPlan(kb_id, current, Generation.from_dict(state.migration_target), state.migration_id)

    def current_generation(self, settings: KnowledgeBaseSettings) -> Generation:
        """The generation a knowledge base's settings name: search reads it, writes go to it."""
        return Generation(self.spec_of(settings), settings.index_generation)

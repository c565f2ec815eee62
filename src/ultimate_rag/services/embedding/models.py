"""Each knowledge base's embedding model (SPEC §3): an embedder per model, built once per process
and shared by the worker, search, answers and dedup; the embedding service in front of it (the
cache keys on the model's name, so vectors of two models never mix); and where the knowledge
base's vectors go right now (its current index generation and, during a migration, the new one).

Bounded: embedders are made only for models that were accepted (a knowledge base's, or a
migration's target once started: a model tried and refused leaves nothing behind, see ``trial``),
and at most ``max_models`` are kept besides the default, the least recently used going first. One
that goes is closed once ``RETIRE_GRACE_SECONDS`` have passed (a call still running on it ends
first), or when the process closes."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from ...domain.embedding_models import EmbeddingSpec, Generation, IndexPlan, spec_of, validate_spec
from ...domain.errors import PermanentError
from ...domain.models import IndexState, KnowledgeBaseSettings
from ...domain.ports import Closable, IndexStateReader, StreamingEmbedder
from .passages import EmbeddingService

RETIRE_GRACE_SECONDS = 60.0


class EmbeddingModels:
    def __init__(self, *, default: EmbeddingService, local: EmbeddingSpec,
                 make_embedder: Callable[[EmbeddingSpec], StreamingEmbedder],
                 make_service: Callable[[StreamingEmbedder], EmbeddingService],
                 openai_configured: bool, max_dimension: int, states: IndexStateReader | None = None,
                 max_models: int = 8) -> None:
        """``states``: each knowledge base's index state (None: every knowledge base reads the
        default model's first generation, as before migrations existed). ``max_models``: embedders
        of other models kept at once."""
        embedder = default.embedder
        self.local = local
        self.default = local if embedder.name == local.model else EmbeddingSpec(
            "openai", embedder.name, embedder.dimension)
        self._make_embedder = make_embedder
        self._make_service = make_service
        self.openai_configured = openai_configured
        self.max_dimension = max_dimension
        self._states = states
        self._default_service = default
        self._max_models = max(1, max_models)
        self._services: OrderedDict[tuple[str, str, int], EmbeddingService] = OrderedDict()
        self._retired: list[tuple[float, EmbeddingService]] = []  # evicted, closed after the grace
        self._closing: set[asyncio.Task[None]] = set()

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
        if spec.key == self.default.key:
            return self._default_service
        self._close_retired()
        service = self._services.get(spec.key)
        if service is not None:
            self._services.move_to_end(spec.key)
            return service
        self._check_usable(spec)
        service = self._services[spec.key] = self._make_service(self._make_embedder(spec))
        while len(self._services) > self._max_models:
            _, gone = self._services.popitem(last=False)
            self._retired.append((time.monotonic(), gone))
        return service

    def embedder(self, spec: EmbeddingSpec) -> StreamingEmbedder:
        return self.embedding(spec).embedder

    @asynccontextmanager
    async def trial(self, spec: EmbeddingSpec) -> AsyncIterator[StreamingEmbedder]:
        """An embedder of ``spec`` for a check before the model is accepted (a migration's
        dimension check): the one in use if there is one, else a new one that is closed after,
        and never kept."""
        if spec.key == self.default.key or spec.key in self._services:
            yield self.embedder(spec)
            return
        self._check_usable(spec)
        embedder = self._make_embedder(spec)
        try:
            yield embedder
        finally:
            if isinstance(embedder, Closable):
                await embedder.aclose()

    def services(self) -> list[EmbeddingService]:
        """Every embedding service this process holds, the retired ones not yet closed included."""
        return [self._default_service, *self._services.values(), *(s for _, s in self._retired)]

    def _check_usable(self, spec: EmbeddingSpec) -> None:
        if spec.embedder == "openai" and not self.openai_configured:
            raise PermanentError(f"this knowledge base embeds with {spec.model} on an OpenAI-compatible server, "
                                 "but ULTIMATE_RAG_EMBEDDING_BASE_URL is not set here")
        if spec.embedder == "local" and spec.key != self.local.key:
            raise PermanentError(f"unknown local embedding model {spec.model}")

    def _close_retired(self) -> None:
        """Close the evicted embedders whose grace has passed (in the background: this is called
        from synchronous code on the event loop)."""
        if not self._retired:
            return
        cutoff = time.monotonic() - RETIRE_GRACE_SECONDS
        due = [s for at, s in self._retired if at <= cutoff]
        if not due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here: closed at the next call made on one, or with the process
            return
        self._retired = [(at, s) for at, s in self._retired if at > cutoff]
        for service in due:
            if isinstance(service.embedder, Closable):
                task = loop.create_task(service.embedder.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

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

"""A knowledge base's embedding model (SPEC §3, §4 rule 3): which embedder computes its vectors
(``local``: the bundled e5 model; ``openai``: the OpenAI-compatible server configured by
``ULTIMATE_RAG_EMBEDDING_BASE_URL``), the model's name and its dimension, plus the index
generation that holds the vectors. Changing the model is a migration into a new generation."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from uuid import UUID

from .errors import UnprocessableRequestError

EMBEDDERS = ("local", "openai")
MAX_MODEL_NAME = 200


@dataclass(frozen=True, slots=True)
class EmbeddingSpec:
    """What computes a knowledge base's vectors. Two specs with the same ``key`` share an
    embedder instance (one per process) and cache entries (the cache keys on the model name)."""

    embedder: str
    model: str
    dimension: int

    @property
    def key(self) -> tuple[str, str, int]:
        return self.embedder, self.model, self.dimension

    def to_dict(self) -> dict[str, Any]:
        return {"embedder": self.embedder, "model": self.model, "dimension": self.dimension}


@dataclass(frozen=True, slots=True)
class Generation:
    """An index generation: where the vectors of one model live. 0 is the model's shared index;
    N >= 1 a table or collection of one knowledge base alone, built by a migration."""

    spec: EmbeddingSpec
    number: int

    def to_dict(self) -> dict[str, Any]:
        return self.spec.to_dict() | {"generation": self.number}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Generation:
        """The inverse of ``to_dict`` (a migration's recorded source and target)."""
        spec = EmbeddingSpec(data["embedder"], data["model"], int(data["dimension"]))
        return cls(spec, int(data["generation"]))


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """Where a knowledge base's vectors go right now: its current generation and, while a
    migration runs, the one being built (new documents are embedded for both)."""

    knowledge_base_id: UUID
    current: Generation
    target: Generation | None = None
    migration_id: int | None = None

    @property
    def generations(self) -> list[Generation]:
        return [self.current] + ([self.target] if self.target else [])


def spec_of(settings: Any, default: EmbeddingSpec, local_model: str) -> EmbeddingSpec:
    """The knowledge base's spec from its settings. Knowledge bases made before the embedder was
    recorded have only a model name: the local model's name means ``local``, any other name the
    HTTP embedder; none at all means the process default."""
    model, dimension = settings.embedding_model, settings.embedding_dimension
    if not model:
        return default
    embedder = settings.embedder or ("local" if model == local_model else "openai")
    return EmbeddingSpec(embedder, model, int(dimension or default.dimension))


def validate_spec(embedder: str, model: str | None, dimension: int | None, *, local: EmbeddingSpec,
                  openai_configured: bool, max_dimension: int) -> EmbeddingSpec:
    """A requested spec, or InvalidRequestError (422) saying what is wrong with it."""
    if embedder not in EMBEDDERS:
        raise UnprocessableRequestError(f"unknown embedder {embedder!r}: 'local' or 'openai'")
    if embedder == "local":
        if model not in (None, "", local.model):
            raise UnprocessableRequestError(f"the local embedder has one model, {local.model}")
        if dimension not in (None, local.dimension):
            raise UnprocessableRequestError(f"the local model has {local.dimension} dimensions, not {dimension}")
        return local
    if not openai_configured:
        raise UnprocessableRequestError("no OpenAI-compatible embedding server is configured "
                                  "(ULTIMATE_RAG_EMBEDDING_BASE_URL)")
    if not model or len(model) > MAX_MODEL_NAME or any(ord(c) < 32 for c in model):
        raise UnprocessableRequestError(f"the openai embedder needs a model name of 1 to {MAX_MODEL_NAME} characters")
    if dimension is None or not 1 <= dimension <= max_dimension:
        raise UnprocessableRequestError(f"the openai embedder needs a dimension between 1 and {max_dimension}")
    return EmbeddingSpec("openai", model, int(dimension))


class MigrationStatus(StrEnum):
    RUNNING = "RUNNING"      # items being embedded into the new generation
    SWITCHED = "SWITCHED"    # the knowledge base serves the new generation; the old one is dropped
    ABORTED = "ABORTED"      # stopped by a user; the new generation is dropped
    FAILED = "FAILED"        # some document could not be embedded with the new model: no switch


class ItemStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    SKIPPED = "SKIPPED"      # the document is no longer READY (deleted, failed, outdated): nothing to embed
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"  # the migration was aborted


@dataclass(frozen=True, slots=True)
class MigrationLease:
    """One claimed migration item; every write on its behalf is fenced on these three."""

    item_id: int
    migration_id: int
    document_id: Any
    knowledge_base_id: Any
    worker_id: str
    attempt: int
    max_attempts: int

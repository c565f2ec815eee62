"""A new knowledge base's settings, decided once when it is created: what was asked for, the
process's chunking defaults for the rest, exact deduplication, and its embedding model, recorded
so that a later change of the process's default model never changes an existing knowledge base."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .embedding_models import EmbeddingSpec
from .errors import InvalidRequestError
from .models import KnowledgeBaseSettings

DEFAULT_DEDUP_MODE = "exact"
DEFAULT_NEAR_DUPLICATE_THRESHOLD = 0.9


def new_settings(requested: Mapping[str, Any], model: EmbeddingSpec, *, chunk_size: int,
                 chunk_overlap: int) -> KnowledgeBaseSettings:
    """``requested``: the settings a client gave (absent keys take the defaults); ``model``: the
    validated requested model, or the process's default; ``chunk_size``/``chunk_overlap``: the
    process's defaults (``ULTIMATE_RAG_CHUNK_SIZE_TOKENS``, ``..._OVERLAP_TOKENS``)."""
    settings = KnowledgeBaseSettings(
        chunk_size_tokens=requested.get("chunk_size_tokens", chunk_size),
        chunk_overlap_tokens=requested.get("chunk_overlap_tokens", chunk_overlap),
        dedup_mode=requested.get("dedup_mode", DEFAULT_DEDUP_MODE),
        near_duplicate_threshold=requested.get("near_duplicate_threshold", DEFAULT_NEAR_DUPLICATE_THRESHOLD),
        embedding_model=model.model, embedding_dimension=model.dimension, embedder=model.embedder)
    if settings.chunk_overlap_tokens >= settings.chunk_size_tokens:
        raise InvalidRequestError("chunk_overlap_tokens must be smaller than chunk_size_tokens")
    return settings

"""A new knowledge base's settings are decided in the domain (domain/knowledge_bases.py): what was
asked for, the process's chunking defaults for the rest, exact deduplication, and the model."""

from __future__ import annotations

import pytest

from ultimate_rag.domain.embedding_models import EmbeddingSpec
from ultimate_rag.domain.errors import InvalidRequestError
from ultimate_rag.domain.knowledge_bases import new_settings

LOCAL = EmbeddingSpec("local", "multilingual-e5-small-q4", 384)


def test_absent_settings_take_the_process_defaults_and_the_model_is_recorded() -> None:
    settings = new_settings({}, LOCAL, chunk_size=300, chunk_overlap=20)
    assert (settings.chunk_size_tokens, settings.chunk_overlap_tokens) == (300, 20)
    assert (settings.dedup_mode, settings.near_duplicate_threshold) == ("exact", 0.9)
    assert (settings.embedder, settings.embedding_model, settings.embedding_dimension) == ("local", LOCAL.model, 384)
    assert settings.index_generation == 0


def test_what_was_asked_for_wins() -> None:
    http = EmbeddingSpec("openai", "m", 1536)
    asked = {"chunk_size_tokens": 128, "chunk_overlap_tokens": 0, "dedup_mode": "near",
             "near_duplicate_threshold": 0.8}
    settings = new_settings(asked, http, chunk_size=300, chunk_overlap=20)
    assert (settings.chunk_size_tokens, settings.chunk_overlap_tokens, settings.dedup_mode,
            settings.near_duplicate_threshold, settings.embedder) == (128, 0, "near", 0.8, "openai")


@pytest.mark.parametrize(("asked", "size", "overlap"), [({"chunk_overlap_tokens": 64}, 64, 0), ({}, 32, 32)])
def test_an_overlap_not_below_the_chunk_size_is_refused(asked: dict[str, int], size: int, overlap: int) -> None:
    with pytest.raises(InvalidRequestError):
        new_settings({"chunk_size_tokens": size, **asked}, LOCAL, chunk_size=size, chunk_overlap=overlap)

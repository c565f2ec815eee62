"""A knowledge base's embedding model (domain/embedding_models.py): what old knowledge bases mean,
and which requested models are refused (422)."""

from __future__ import annotations

from uuid import uuid4

import pytest

from ultimate_rag.domain.embedding_models import EmbeddingSpec, Generation, IndexPlan, spec_of, validate_spec
from ultimate_rag.domain.errors import UnprocessableRequestError
from ultimate_rag.domain.models import KnowledgeBaseSettings

LOCAL = EmbeddingSpec("local", "multilingual-e5-small-q4", 384)


def test_knowledge_bases_made_before_the_embedder_was_recorded_keep_their_model() -> None:
    assert spec_of(KnowledgeBaseSettings(), LOCAL, LOCAL.model) == LOCAL  # nothing recorded: the default
    old_local = KnowledgeBaseSettings(embedding_model=LOCAL.model, embedding_dimension=384)
    assert spec_of(old_local, LOCAL, LOCAL.model) == LOCAL
    old_http = KnowledgeBaseSettings(embedding_model="text-embedding-3-small", embedding_dimension=1536)
    assert spec_of(old_http, LOCAL, LOCAL.model) == EmbeddingSpec("openai", "text-embedding-3-small", 1536)
    assert KnowledgeBaseSettings.from_dict(old_http.to_dict()).index_generation == 0


@pytest.mark.parametrize(("embedder", "model", "dimension", "configured"), [
    ("word2vec", None, None, True),
    ("local", "another-model", None, True),
    ("local", None, 768, True),
    ("openai", "m", 384, False),  # no server configured
    ("openai", None, 384, True),
    ("openai", "m", None, True),
    ("openai", "m", 0, True),
    ("openai", "m", 2001, True),
    ("openai", "bad\nname", 384, True),
])
def test_refused_models(embedder: str, model: str | None, dimension: int | None, configured: bool) -> None:
    with pytest.raises(UnprocessableRequestError):
        validate_spec(embedder, model, dimension, local=LOCAL, openai_configured=configured, max_dimension=2000)


def test_accepted_models() -> None:
    assert validate_spec("local", None, None, local=LOCAL, openai_configured=False, max_dimension=2000) == LOCAL
    assert validate_spec("openai", "m", 1536, local=LOCAL, openai_configured=True,
                         max_dimension=2000) == EmbeddingSpec("openai", "m", 1536)


def test_a_generation_reads_back_as_a_migration_records_it() -> None:
    """A migration records its source and target as the spec's fields plus the generation number
    (JSON: the dimension may come back as any number); reading one back gives the same generation."""
    target = Generation(EmbeddingSpec("openai", "text-embedding-3-small", 1536), 2)
    recorded = target.to_dict()
    assert recorded == {"embedder": "openai", "model": "text-embedding-3-small", "dimension": 1536, "generation": 2}
    assert Generation.from_dict(recorded) == target
    assert Generation.from_dict(recorded | {"dimension": 1536.0, "generation": "2"}) == target


def test_an_index_plan_writes_to_the_target_generation_only_while_a_migration_runs() -> None:
    kb, current = uuid4(), Generation(LOCAL, 0)
    assert IndexPlan(kb, current).generations == [current]
    target = Generation(EmbeddingSpec("openai", "m", 8), 1)
    assert IndexPlan(kb, current, target, migration_id=3).generations == [current, target]

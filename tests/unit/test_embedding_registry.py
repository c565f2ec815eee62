"""The embedders a process keeps (services/embedding/models.py): at most ``max_models`` besides the
default, the least recently used going first and closed after a grace; a model only tried (the
migration's dimension check) is closed at once and never kept. The embedders here are stand-ins
that count what happens to them: what is tested is the registry's bookkeeping."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import pytest

from ultimate_rag.domain.embedding_models import EmbeddingSpec
from ultimate_rag.services.embedding import models as registry
from ultimate_rag.services.embedding.models import EmbeddingModels

LOCAL = EmbeddingSpec("local", "multilingual-e5-small-q4", 384)


class Standin:
    def __init__(self, spec: EmbeddingSpec) -> None:
        self.name, self.dimension, self.closed = spec.model, spec.dimension, False

    async def aclose(self) -> None:
        self.closed = True


def make(max_models: int) -> tuple[EmbeddingModels, list[Standin]]:
    made: list[Standin] = []

    def embedder(spec: EmbeddingSpec) -> Standin:
        made.append(Standin(spec))
        return made[-1]

    default = SimpleNamespace(embedder=Standin(LOCAL))
    models = EmbeddingModels(default=default, local=LOCAL, make_embedder=embedder,  # type: ignore[arg-type]  # stand-ins for the service and embedder
                             make_service=lambda e: SimpleNamespace(embedder=e),  # type: ignore[arg-type, return-value]  # a stand-in service
                             openai_configured=True, max_dimension=2000, max_models=max_models)
    return models, made


async def test_the_registry_is_bounded_and_closes_what_it_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "RETIRE_GRACE_SECONDS", 0.0)
    models, made = make(max_models=3)
    specs = [EmbeddingSpec("openai", f"m{i}", 8) for i in range(20)]
    first = models.embedding(specs[0])
    assert models.embedding(specs[0]) is first and len(made) == 1  # one embedder per model
    for spec in specs:
        models.embedding(spec)
        assert len(models.services()) <= 1 + 3 + 1  # the default, the kept ones, one retired at most
    await asyncio.sleep(0)  # the background closes run
    await asyncio.sleep(0)
    kept: set[object] = {s.embedder for s in models.services()}
    assert sum(not e.closed for e in made) <= 3 + 1
    assert all(e.closed for e in made if e not in kept)
    assert models.embedding(LOCAL) is models.services()[0]  # the default is never dropped


async def test_a_tried_model_is_closed_and_not_kept() -> None:
    models, made = make(max_models=3)
    for i in range(10):
        async with models.trial(EmbeddingSpec("openai", f"tried-{i}", 8)) as embedder:
            assert embedder.name == f"tried-{i}"
    assert len(made) == 10 and all(e.closed for e in made)
    assert len(models.services()) == 1  # the default alone
    accepted = models.embedding(EmbeddingSpec("openai", "accepted", 8))
    async with models.trial(EmbeddingSpec("openai", "accepted", 8)) as embedder:
        assert embedder is accepted.embedder  # in use already: that one, left open
    assert not made[-1].closed and made[-1] is cast(object, accepted.embedder)

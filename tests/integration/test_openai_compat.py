"""The OpenAI-compatible chat API (SPEC §10, docs/openai.md) driven by the official ``openai``
package — sync, async and streaming — against a real uvicorn serving the app, a real worker, the
real e5 model, and the stand-in chat server as the language model (NOT a model: it replies what each
test scripts, so the text and its citations can be checked exactly)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion

from ultimate_rag.services.grounding import NOTHING_RELEVANT
from ultimate_rag.settings import Settings

from ..conftest import ADMIN_KEY
from .answering import ingest, prompt_of, serve, standin, with_llm

__all__ = ["standin"]


@pytest.fixture
def settings(settings: Settings, standin) -> Settings:
    return with_llm(settings, standin.base_url)


def extra(obj: Any) -> dict[str, Any]:
    """The fields an OpenAI object holds beyond OpenAI's own (ours: citations, cited, query, ...)."""
    return obj.model_extra or {}


def base_url(client) -> str:
    return f"{client.base_url}/v1"


async def new_key(client, kb: str, role: str = "reader") -> str:
    r = await client.post("/api/keys", json={"scopes": [{"knowledge_base_id": kb, "role": role}]})
    assert r.status_code == 201, r.text
    return str(r.json()["key"])


async def test_models_are_the_knowledge_bases_a_key_may_read(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",), name="Router handbook")
        other = (await client.post("/api/knowledge-bases", json={"name": "secret-plans"})).json()["id"]
        admin = openai.AsyncOpenAI(base_url=base_url(client), api_key=ADMIN_KEY)
        assert {m.id for m in (await admin.models.list()).data} == {"Router handbook", "secret-plans"}
        reader = openai.AsyncOpenAI(base_url=base_url(client), api_key=await new_key(client, ids["kb"]))
        models = (await reader.models.list()).data
        assert [m.id for m in models] == ["Router handbook"] and models[0].owned_by == "ultimate-rag"
        assert (await reader.models.retrieve("router handbook")).id == "Router handbook"
        for name in ("secret-plans", other, "nope"):  # another key's knowledge base does not exist for it
            with pytest.raises(openai.NotFoundError) as err:
                await reader.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}])
            assert "does not exist" in err.value.message
        with pytest.raises(openai.AuthenticationError):
            await openai.AsyncOpenAI(base_url=base_url(client), api_key="wrong").models.list()
        with pytest.raises(openai.UnprocessableEntityError):
            await admin.chat.completions.create(model="secret-plans", messages=[{"role": "assistant", "content": "x"}])


async def test_a_sync_completion_cites_in_the_text_and_as_a_field(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        standin.script({"reply": "The last ferry leaves at midnight from pier two [1]. Buses run too [7]."})
        sync = openai.OpenAI(base_url=base_url(client), api_key=ADMIN_KEY, max_retries=0)

        def ask() -> ChatCompletion:  # the sync client, in a thread: the server runs on this loop
            return sync.chat.completions.create(
                model="answers", temperature=0.2, user="someone", extra_body={"top_k": 4},
                messages=[{"role": "system", "content": "You are helpful."},
                          {"role": "user", "content": [{"type": "text", "text": "When does the last ferry leave at night?"}]}])

        completion = await asyncio.to_thread(ask)
    text = completion.choices[0].message.content or ""
    assert completion.object == "chat.completion" and completion.model == "answers"
    assert completion.choices[0].finish_reason == "stop" and completion.choices[0].message.role == "assistant"
    answer, sources = text.split("\n\nSources:\n")
    assert answer == "The last ferry leaves at midnight from pier two [1]. Buses run too."  # [7]: invented, removed
    assert sources == "[1] ferry.pdf — Ferry Timetable › Night Service — page 2"
    citations = extra(completion)["citations"]
    assert citations[0]["n"] == 1 and citations[0]["document_id"] == ids["ferry.pdf"]
    assert citations[0]["locator"]["page"] == 2 and extra(completion)["cited"] == [1]
    assert completion.usage is not None and completion.usage.prompt_tokens == 11 and completion.usage.completion_tokens == 14
    assert "You are helpful" not in prompt_of(standin.state()["requests"][0])  # the grounded prompt is ours


async def test_a_streamed_completion_is_chunks_then_sources_then_done(container, standin) -> None:
    async with serve(container) as client:
        await ingest(client, container)
        standin.script({"reply": "Hold the power button [1] for ten seconds [12], then wait [1, 3]."})
        aclient = openai.AsyncOpenAI(base_url=base_url(client), api_key=ADMIN_KEY, max_retries=0)
        stream = await aclient.chat.completions.create(
            model="answers", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "How do I reset the router?"}], extra_body={"top_k": 3})
        chunks = [c async for c in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant" and extra(chunks[0])["citations"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    answer, sources = text.split("\n\nSources:\n")
    assert "[12]" not in answer and answer.startswith("Hold the power button [1]")
    assert sources.startswith("[1] router.md — Router manual › Reset")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
    assert {int(n) for n in re.findall(r"^\[(\d+)\]", sources, re.MULTILINE)} == cited
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == "stop" and extra(last)["citations"][0]["filename"] == "router.md"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None and usage.completion_tokens > 0


async def test_filters_follow_ups_and_the_no_answer_rule(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        r = await client.patch(f"/api/documents/{ids['router.md']}", json={"metadata": {"team": "network"}})
        assert r.status_code == 200
        aclient = openai.AsyncOpenAI(base_url=base_url(client), api_key=await new_key(client, ids["kb"]),
                                     max_retries=0)
        standin.script({"reply": "reset the router"}, {"reply": "Hold the button [1]."})
        completion = await aclient.chat.completions.create(
            model=ids["kb"], extra_body={"filters": {"metadata": {"team": "network"}}},
            messages=[{"role": "user", "content": "Tell me about the ferry and the router."},
                      {"role": "assistant", "content": "Which part?"},
                      {"role": "user", "content": "How do I reset it?"}])
        assert extra(completion)["query"] == "reset the router"  # the follow-up, rewritten
        assert {c["filename"] for c in extra(completion)["citations"]} == {"router.md"}  # the filter held
        assert extra(completion)["citations"][0]["metadata"]["team"] == "network"
        asked = len(standin.state()["requests"])
        stream = await aclient.chat.completions.create(
            model="answers", stream=True, messages=[{"role": "user", "content": "김치찌개는 어떻게 끓이나요?"}])
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == NOTHING_RELEVANT["ko"] and len(standin.state()["requests"]) == asked  # no model call
        with pytest.raises(openai.UnprocessableEntityError) as err:
            await aclient.chat.completions.create(model="answers", messages=[{"role": "user", "content": "x"}],
                                                  extra_body={"filters": {"metadata": {"a": {"$bad": 1}}}})
        assert "unknown operator" in err.value.message

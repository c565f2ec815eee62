"""What a provider cannot make an answer do (docs/security.md, "Grounded answers"), against the
stand-in chat server (NOT a language model: it sends exactly what each test scripts): an answer is
cut at ``llm_max_answer_bytes`` and after ``llm_max_answer_seconds`` (the provider's request is
cancelled), a streamed answer ends when its key is revoked, malformed output is a readable 502 and
never reaches the metrics, and model text cannot forge server-sent events."""

from __future__ import annotations

import asyncio
import json
import re
from uuid import UUID

import pytest

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain.auth import Role
from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually

from .answering import ingest, read_events, serve, standin, stream_answer, with_llm

__all__ = ["standin"]
QUESTION = {"question": "How do I reset the router?", "top_k": 2}


@pytest.fixture
def settings(settings: Settings, standin) -> Settings:
    return with_llm(settings, standin.base_url, llm_max_answer_bytes=1024, llm_max_answer_seconds=1.5,
                    event_stream_key_check_seconds=0.1)


async def cancelled(standin) -> int:
    """Streams the client abandoned since the last script."""
    return int((await asyncio.to_thread(standin.state))["cancelled"])


async def test_an_answer_is_cut_in_bytes_and_in_time(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        url = f"/api/knowledge-bases/{ids['kb']}/answer"
        huge = "Hold the power button [1]. " * 800  # about 21 KB, whatever max_tokens said
        standin.script({"reply": huge})
        body = (await client.post(url, json=QUESTION)).json()
        assert len(body["answer"].encode()) <= 1024 and huge.startswith(body["answer"])
        assert body["reason"] == "the answer was cut at 1024 bytes"

        standin.script({"reply": huge})
        frames = await stream_answer(client, ids["kb"], QUESTION)
        sent = "".join(d["text"] for e, d in frames if e == "delta")
        assert len(sent.encode()) <= 1024 and frames[-1][0] == "done"
        assert frames[-1][1]["reason"] == "the answer was cut at 1024 bytes"

        # the OpenAI-compatible API says it as OpenAI does: finish_reason "length"
        chat = {"model": ids["kb"], "top_k": 2, "messages": [{"role": "user", "content": QUESTION["question"]}]}
        standin.script({"reply": huge})
        whole = (await client.post("/v1/chat/completions", json=chat)).json()
        assert whole["choices"][0]["finish_reason"] == "length"
        assert len(whole["choices"][0]["message"]["content"].split("\n\nSources:")[0].encode()) <= 1024
        standin.script({"reply": huge})
        async with client.stream("POST", "/v1/chat/completions", json={**chat, "stream": True}) as response:
            ends = [json.loads(line[6:])["choices"][0]["finish_reason"] async for line in response.aiter_lines()
                    if line.startswith("data: {") and json.loads(line[6:]).get("choices")]
        assert ends[-1] == "length" and set(ends[:-1]) == {None}

        # a slow drip (each piece well inside the read timeout) ends on time, and the provider's
        # request with it
        standin.script({"reply": "Hold the power button for ten seconds [1]. " * 20, "delay": 0.2})
        body = (await client.post(url, json=QUESTION)).json()
        assert body["reason"].startswith("the answer was cut after 1.5 s") and body["answer"]
        await eventually(lambda: cancelled(standin), lambda n: n == 1, what="the provider's request ended")
        metrics = (await client.get("/metrics")).text
    assert 'ultimate_rag_answers_total{outcome="truncated"} 5.0' in metrics  # /answer thrice, /v1 twice


async def test_a_streamed_answer_ends_when_its_key_is_revoked(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        repo = ApiKeyRepository(container.infra.db)
        reader = await repo.create(is_admin=False, scopes={UUID(ids["kb"]): Role.READER})
        container.settings.llm_max_answer_seconds = 3600  # not a factor here (the config was read already)
        standin.script({"hold": True, "reply": "Hold the power button"})  # then silence, until we leave
        seen: list[tuple[str, dict]] = []
        async with client.stream("POST", f"/api/knowledge-bases/{ids['kb']}/answer",
                                 json={**QUESTION, "stream": True},
                                 headers={"Authorization": f"Bearer {reader}"}) as response:
            async for event, data in read_events(response):
                seen.append((event, data))
                if event == "delta" and len([e for e, _ in seen if e == "delta"]) == 1:
                    await repo.revoke(reader.split("_")[1])
        assert seen[-1] == ("error", {"detail": "the API key was revoked or has expired"})
        await eventually(lambda: cancelled(standin), lambda n: n == 1, what="the provider's request ended")

        # the OpenAI-compatible stream re-checks its key the same way
        other = await repo.create(is_admin=False, scopes={UUID(ids["kb"]): Role.READER})
        standin.script({"hold": True, "reply": "Hold the power button"})
        payloads: list[str] = []
        async with client.stream("POST", "/v1/chat/completions", headers={"Authorization": f"Bearer {other}"},
                                 json={"model": ids["kb"], "stream": True, "top_k": 2,
                                       "messages": [{"role": "user", "content": QUESTION["question"]}]}) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    payloads.append(line[6:])
                    if '"content":"Hold"' in line:  # the first piece of the answer
                        await repo.revoke(other.split("_")[1])
        assert payloads[-1] == "[DONE]" and json.loads(payloads[-2])["error"]["code"] == "invalid_api_key"
        await eventually(lambda: cancelled(standin), lambda n: n == 1, what="the provider's request ended")


async def test_malformed_provider_output_is_a_readable_502_and_never_reaches_the_metrics(container,
                                                                                        standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        url = f"/api/knowledge-bases/{ids['kb']}/answer"
        standin.script({"chunks": [{"choices": 5}]})
        r = await client.post(url, json=QUESTION)
        assert r.status_code == 502 and "choices are not a list" in r.json()["detail"]
        standin.script({"chunks": [{"choices": 5}]})
        frames = await stream_answer(client, ids["kb"], QUESTION)
        assert frames[-1][0] == "error" and "choices are not a list" in frames[-1][1]["detail"]

        good = {"choices": [{"index": 0, "delta": {"content": "Hold it [1]."}}]}
        for usage in ({"prompt_tokens": -5, "completion_tokens": 3}, {"prompt_tokens": 1e308, "completion_tokens": 1},
                      {"prompt_tokens": 10 ** 30, "completion_tokens": 10 ** 30},
                      {"prompt_tokens": "many", "completion_tokens": None}):
            standin.script({"chunks": [good, {"choices": [], "usage": usage}]})
            r = await client.post(url, json=QUESTION)
            assert r.status_code == 200 and r.json()["answer"] == "Hold it [1]."
            assert r.json()["usage"]["estimated"] is True  # the report was dropped: counted here instead

        # the rewrite of a follow-up reads the provider's whole reply: bounded too
        standin.script({"body": {"choices": [{"message": {"content": "x" * (2 << 20)}}]}})
        r = await client.post(url, json={**QUESTION, "messages": [{"role": "user", "content": "hi"},
                                                                  {"role": "assistant", "content": "hello"}]})
        assert r.status_code == 502 and "larger than" in r.json()["detail"]
        standin.script({"body": {"choices": [{"message": 7}]}})
        r = await client.post(url, json={**QUESTION, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 502 and r.json()["detail"] == "the language model's reply has no message"
        metrics = (await client.get("/metrics")).text
    tokens = [float(v) for v in re.findall(r'^ultimate_rag_answer_tokens_total\{direction="\w+"\} (\S+)$', metrics,
                                           re.MULTILINE)]
    assert len(tokens) == 2 and all(0 <= t < 1e6 for t in tokens), tokens


async def test_model_text_cannot_forge_events(container, standin) -> None:
    """U+2028, U+2029, U+0085 and the other characters ``str.splitlines`` ends a line at are escaped
    in event data: a client that splits lines that way sees only the server's own events."""
    forged = ('Fine [1].\u2028event: done\u2028data: {"answer": "forged"}\u2029\x85\x0b\x0c\x1c\x1d\x1e'
              'event: citations\u2028data: []\u2028\u2028')
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        standin.script({"reply": forged})
        async with client.stream("POST", f"/api/knowledge-bases/{ids['kb']}/answer",
                                 json={**QUESTION, "stream": True}) as response:
            raw = (await response.aread()).decode()
    lines = raw.splitlines()
    events = [line for line in lines if line.startswith("event:")]
    assert events[0] == "event: citations" and events[-1] == "event: done"
    assert events.count("event: done") == 1 and events.count("event: citations") == 1
    assert all(line.startswith(("event:", "data:")) or line == "" for line in lines), lines
    frames = [f for f in raw.split("\n\n") if f]
    done = frames[-1].split("\ndata: ", 1)[1]
    assert "forged" in done and '\\u2028' in done  # the text is all there, escaped

    async with serve(container) as client:  # the OpenAI-compatible stream: only data lines, one event each
        standin.script({"reply": forged})
        async with client.stream("POST", "/v1/chat/completions", json={
                "model": ids["kb"], "stream": True, "top_k": 2,
                "messages": [{"role": "user", "content": QUESTION["question"]}]}) as response:
            raw = (await response.aread()).decode()
    lines = raw.splitlines()
    assert all(line.startswith("data: ") or line == "" for line in lines), lines
    assert lines[-2:] == ["data: [DONE]", ""]
    text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                   for line in lines if line.startswith("data: {") and json.loads(line[6:]).get("choices"))
    assert "\u2028event: done" in text  # the text is all there, as the model wrote it

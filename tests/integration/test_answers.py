"""Grounded answers through real HTTP (SPEC §10), with the stand-in chat server (NOT a language
model: it replies what each test scripts, so citations and events can be checked exactly). The
real model is in test_answers_real_model.py; provider failures in test_answers_provider.py."""

from __future__ import annotations

import re

import pytest

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.auth import Role
from ultimate_rag.services.grounding import NOTHING_RELEVANT
from ultimate_rag.settings import Settings

from .answering import PROVIDER_KEY, ingest, prompt_of, serve, standin, stream_answer, with_llm

__all__ = ["standin"]


@pytest.fixture
def settings(settings: Settings, standin) -> Settings:
    return with_llm(settings, standin.base_url)


async def test_the_answer_cites_the_chunks_pages_and_images_it_used(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        standin.script({"reply": "The last ferry leaves at midnight from pier two [1]. Buses run too [7]."})
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer",
                              json={"question": "When does the last ferry leave at night?", "top_k": 4})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["answer"] == "The last ferry leaves at midnight from pier two [1]. Buses run too."
        assert body["invalid_citations"] == [7] and body["cited"] == [1] and body["grounded"] is True
        assert body["query"] == "When does the last ferry leave at night?" and body["language"] == "en"
        first = body["citations"][0]
        assert first["n"] == 1 and first["filename"] == "ferry.pdf" and first["locator"]["page"] == 2
        assert "The last ferry departs at midnight from pier two." in first["content"]
        chunks = (await client.get(f"/api/documents/{ids['ferry.pdf']}/chunks")).json()["items"]
        cited = next(c for c in chunks if c["id"] == first["chunk_id"])
        assert first["document_id"] == ids["ferry.pdf"] and cited["content"] == first["content"]
        assert first["heading_path"] == cited["heading_path"] == ["Ferry Timetable", "Night Service"]
        assert [c["n"] for c in body["citations"]] == list(range(1, len(body["citations"]) + 1))
        assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 14, "estimated": False}
        assert {"retrieval_seconds", "first_token_seconds", "model_seconds", "total_seconds"} <= set(body["timing"])
        # the prompt: every passage numbered with its source, the question, the language rule
        request = standin.state()["requests"][0]
        assert request["body"]["model"] == "stand-in" and request["authorization"] == f"Bearer {PROVIDER_KEY}"
        prompt = prompt_of(request)
        assert "[1] ferry.pdf — Ferry Timetable › Night Service — page 2" in prompt and "Answer in English" in prompt
        assert prompt.endswith("Question: When does the last ferry leave at night?")

        standin.script({"reply": "See the map [1]."})
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer",
                              json={"question": "Is there a map of the harbour piers?", "top_k": 3})
        image = r.json()["citations"][0]
        assert image["locator"]["page"] == 1 and image["assets"][0]["description"] == "Figure 1: Map of the harbour piers"
        assert (await client.get(image["assets"][0]["url"])).status_code == 200


async def test_streamed_answer_sends_citations_then_deltas_then_done(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        standin.script({"reply": "Hold the power button [1] for ten seconds [12], then wait [1, 3]."})
        frames = await stream_answer(client, ids["kb"], {"question": "How do I reset the router?", "top_k": 3})
        # an answer that cites none of its passages is marked, in the stream's done and in JSON
        standin.script({"reply": "Routers are fickle [9]."}, {"reply": "Routers are fickle."})
        ungrounded = await stream_answer(client, ids["kb"], {"question": "How do I reset the router?", "top_k": 3})
        as_json = (await client.post(f"/api/knowledge-bases/{ids['kb']}/answer",
                                     json={"question": "How do I reset the router?", "top_k": 3})).json()
    assert ungrounded[-1][0] == "done" and ungrounded[-1][1]["grounded"] is False
    assert ungrounded[-1][1]["answer"] == "Routers are fickle." and ungrounded[-1][1]["invalid_citations"] == [9]
    assert as_json["grounded"] is False and as_json["cited"] == [] and as_json["citations"]
    events = [e for e, _ in frames]
    assert events[0] == "citations" and events[-1] == "done"
    assert set(events[1:-1]) == {"delta"} and len(events) > 4
    citations, done = frames[0][1], frames[-1][1]
    assert citations[0]["filename"] == "router.md" and citations[0]["heading_path"] == ["Router manual", "Reset"]
    assert citations[0]["locator"]["line_start"] >= 1
    text = "".join(d["text"] for e, d in frames if e == "delta")
    assert text == done["answer"]
    valid = {c["n"] for c in citations}
    assert all(int(n) in valid for n in re.findall(r"\[(\d+)\]", text)) and "[12]" not in text
    assert 12 in done["invalid_citations"] and "citations" not in done and done["grounded"] is True
    assert done["usage"]["completion_tokens"] > 0 and done["timing"]["total_seconds"] >= 0


@pytest.mark.parametrize(("stream", "question", "language"), [
    (False, "宇宙的年龄是多少？", "zh"), (True, "우주의 나이는 얼마나 되나요?", "ko"),
    (False, "Who won the 1998 football world cup?", "en")])
async def test_nothing_relevant_says_so_in_the_question_language_without_a_model_call(
        container, standin, stream: bool, question: str, language: str) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container, files=("router.md",))
        standin.script()
        body = {"question": question, "top_k": 5}
        if stream:
            frames = await stream_answer(client, ids["kb"], body)
            assert [e for e, _ in frames] == ["citations", "delta", "done"] and frames[0][1] == []
            answer = frames[-1][1]
        else:
            answer = (await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=body)).json()
            assert answer["citations"] == []
    assert answer["answer"] == NOTHING_RELEVANT[language] and answer["language"] == language
    assert answer["grounded"] is False
    assert "nothing relevant" in answer["reason"]
    assert standin.state()["requests"] == []


async def test_without_a_model_the_cited_passages_come_back_with_the_reason(settings: Settings, embedder,
                                                                            standin) -> None:
    plain = settings.model_copy(update={"llm_base_url": None, "llm_model": None})
    container = build(plain, url=plain.database_url, embedder=embedder, pool_size=4)
    await container.open()
    try:
        async with serve(container) as client:
            ids = await ingest(client, container)
            standin.script()
            body = {"question": "How do I reset the router?",
                    "messages": [{"role": "user", "content": "I have a router."}]}
            r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=body)
            frames = await stream_answer(client, ids["kb"], body)
    finally:
        await container.close()
    out = r.json()
    assert r.status_code == 200 and out["answer"] is None and "ULTIMATE_RAG_LLM_BASE_URL" in out["reason"]
    assert out["citations"][0]["filename"] == "router.md" and out["query"] == "How do I reset the router?"
    assert [e for e, _ in frames] == ["citations", "done"] and frames[1][1]["answer"] is None
    assert standin.state()["requests"] == []


async def test_a_follow_up_is_rewritten_into_a_standalone_query(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        standin.script({"reply": "Query: How long must the router's power button be held to reset it?"},
                       {"reply": "Ten seconds [1]."})
        history = [{"role": "user", "content": "How do I reset the router?"},
                   {"role": "assistant", "content": "Hold the power button [1]."}]
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer",
                              json={"question": "For how long?", "messages": history})
    body = r.json()
    assert body["query"] == "How long must the router's power button be held to reset it?"
    assert body["answer"] == "Ten seconds [1]." and body["citations"][0]["filename"] == "router.md"
    rewrite, answer = standin.state()["requests"]
    assert rewrite["body"]["stream"] is False and "user: How do I reset the router?" in prompt_of(rewrite)
    assert "assistant: Hold the power button." in prompt_of(rewrite)
    assert [m["role"] for m in answer["body"]["messages"]] == ["system", "user", "assistant", "user"]
    assert body["usage"]["prompt_tokens"] == 22  # the rewrite and the answer


async def test_readers_may_ask_and_only_their_knowledge_base_reaches_the_prompt(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        other = (await client.post("/api/knowledge-bases", json={"name": "other"})).json()["id"]
        r = await client.post(f"/api/knowledge-bases/{other}/documents",
                              files={"file": ("secret.md", b"# Secret\n\nThe router password is hunter2.\n")})
        from ultimate_rag.services.job_loop import WorkerConfig

        await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
        keys = ApiKeyRepository(container.infra.db)
        reader = {"Authorization": f"Bearer {await keys.create(is_admin=False, scopes={ids['kb']: Role.READER})}"}  # type: ignore[dict-item]  # ids[] is typed as JSON
        standin.script({"reply": "Reset it [1]."})
        secret_doc = r.json()["id"]
        smuggled = {"question": "What is the router password and how do I reset the router?",
                    "filters": {"knowledge_base_id": other}}
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=smuggled, headers=reader)
        assert r.status_code == 422, r.text  # not a filter: refused, never ignored
        # a filter naming another knowledge base's document finds nothing of it
        question = {"question": smuggled["question"], "filters": {"document_ids": [secret_doc, ids["router.md"]]}}
        r = await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json=question, headers=reader)
        assert r.status_code == 200, r.text
        assert {c["filename"] for c in r.json()["citations"]} <= {"router.md"}
        assert "hunter2" not in prompt_of(standin.state()["requests"][0])
        denied = await client.post(f"/api/knowledge-bases/{other}/answer", json=question, headers=reader)
        assert denied.status_code == 404 and "hunter2" not in denied.text


async def test_metrics_count_answers_latency_and_tokens(container, standin) -> None:
    async with serve(container) as client:
        ids = await ingest(client, container)
        standin.script({"reply": "Reset it [1]."})
        await client.post(f"/api/knowledge-bases/{ids['kb']}/answer", json={"question": "How do I reset the router?"})
        text = (await client.get("/metrics")).text
    assert 'ultimate_rag_answers_total{outcome="answered"} 1.0' in text
    assert "ultimate_rag_answer_duration_seconds_count 1.0" in text
    assert "ultimate_rag_answer_first_token_seconds_count 1.0" in text
    assert "ultimate_rag_answer_retrieval_seconds_count 1.0" in text
    assert 'ultimate_rag_answer_tokens_total{direction="in"} 11.0' in text
    assert 'ultimate_rag_answer_tokens_total{direction="out"} 3.0' in text


@pytest.mark.parametrize("body", [{}, {"question": ""}, {"question": "x", "top_k": 0}, {"question": "x", "top_k": 101},
                                  {"question": "x", "messages": [{"role": "system", "content": "obey"}]},
                                  {"question": "x" * 5000}, {"question": "a\x00b"},
                                  {"question": "   ", "messages": [{"role": "user", "content": "hello"}]},
                                  # unknown fields: a misspelt `filter` must not answer over everything
                                  {"question": "x", "filter": {"filename": "*.pdf"}},
                                  {"question": "x", "messages": [{"role": "user", "content": "hi", "name": "n"}]}])
async def test_bad_requests_are_4xx_before_any_model_call(container, standin, body) -> None:
    async with serve(container) as client:
        kb = (await client.post("/api/knowledge-bases", json={"name": "bad"})).json()["id"]
        standin.script()
        r = await client.post(f"/api/knowledge-bases/{kb}/answer", json=body)
    assert r.status_code in (400, 422) and "detail" in r.json()
    if "filter" in body or "name" in str(body):
        assert r.status_code == 422 and "Extra inputs are not permitted" in r.json()["detail"]
    assert standin.state()["requests"] == []

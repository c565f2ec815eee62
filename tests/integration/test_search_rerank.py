"""Optional reranking (SPEC §10, docs/search.md): the top results re-scored by a cross-encoder behind
the ``/v1/rerank`` API, through the HTTP API. The server is a STAND-IN (testing/rerank_standin.py:
it says so in every answer; it scores by shared terms), since no cross-encoder can run here: it
checks the protocol, the order it imposes, both answer shapes, timeouts and retries, the readable
502/504, and that the key goes only to the reranker."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing.rerank_standin import MODEL, RerankStandIn

from ..conftest import ADMIN_KEY

KEY = "rerank-secret-key-5e1f"
DOCS = {
    "ferry.txt": "The ferry to the island leaves at nine and returns at six; bicycles travel free.",
    "bakery.txt": "The bakery on the harbour sells rye bread, cinnamon buns and coffee from seven.",
    "museum.txt": "The maritime museum shows the lighthouse lens and the ferry's first timetable.",
}


@pytest.fixture
def standin() -> Iterator[RerankStandIn]:
    server = RerankStandIn().start()
    yield server
    server.stop()


@pytest.fixture
def settings(db_url: str, tmp_path: Path, standin: RerankStandIn) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY,
                    rerank_base_url=standin.url, rerank_model="bge-reranker-v2-m3", rerank_api_key=KEY,
                    rerank_timeout_seconds=1.0, rerank_max_retries=1)


async def knowledge_base(client: httpx.AsyncClient, container) -> str:
    kb = (await client.post("/api/knowledge-bases", json={"name": f"kb-{uuid4().hex[:6]}"})).json()["id"]
    for name, text in DOCS.items():
        r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, text.encode(), "text/plain")})
        assert r.status_code == 202, r.text
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    return kb


async def test_the_reranker_orders_the_results_and_failures_read_as_502_and_504(
        client: httpx.AsyncClient, container, standin: RerankStandIn, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    kb = await knowledge_base(client, container)
    query = "bakery rye bread cinnamon buns"
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": query, "top_k": 2})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results[0]["filename"] == "bakery.txt" and len(results) == 2
    assert results[0]["score"] == 1.0  # the reranker's relevance: every query term is in the bakery's text
    asked = standin.requests[-1]
    assert asked["path"] == "/v1/rerank" and asked["authorization"] == f"Bearer {KEY}"
    assert asked["body"]["model"] == "bge-reranker-v2-m3" and asked["body"]["query"] == query
    assert len(asked["body"]["documents"]) == 3  # every candidate (fewer than rerank_candidates), not top_k

    standin.script = [{"shape": "tei"}]  # TEI's own answer shape
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "ferry timetable lighthouse lens"})
    assert r.status_code == 200 and r.json()["results"][0]["filename"] == "museum.txt"

    standin.script = [{"status": 503}, {"status": 503}]  # one try and one retry, both refused
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "ferry"})
    assert r.status_code == 502 and "reranker" in r.json()["detail"] and "503" in r.json()["detail"]

    standin.script = [{"stall": 1.5}, {"stall": 1.5}]  # past the 1 s timeout, twice
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "ferry"})
    assert r.status_code == 504 and "did not answer within 1 s" in r.json()["detail"]

    standin.script = [{"status": 503}]  # a retry that then succeeds
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "ferry"})
    assert r.status_code == 200

    standin.script = [{"status": 401}]  # a configuration error: no retry, the setting named
    before = len(standin.requests)
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "ferry"})
    assert r.status_code == 502 and "ULTIMATE_RAG_RERANK_API_KEY" in r.json()["detail"]
    assert len(standin.requests) == before + 1
    assert KEY not in caplog.text and KEY not in r.text
    assert MODEL.startswith("stand-in")

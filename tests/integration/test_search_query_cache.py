"""Repeated queries are not embedded again (a bounded per-process LRU), and the cache never changes
what a search returns."""

from __future__ import annotations

import httpx

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.search import QueryCache


def test_query_cache_is_bounded_and_least_recently_used() -> None:
    cache = QueryCache(2)
    cache.put(("dense", "a"), (1.0,))
    cache.put(("dense", "b"), (2.0,))
    assert cache.get(("dense", "a")) == (1.0,)  # a is now the most recent
    cache.put(("dense", "c"), (3.0,))
    assert cache.get(("dense", "b")) is None and cache.get(("dense", "a")) == (1.0,)
    off = QueryCache(0)
    off.put(("dense", "a"), (1.0,))
    assert off.get(("dense", "a")) is None


async def test_a_repeated_query_is_embedded_once(client: httpx.AsyncClient, container, monkeypatch) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "cache"})).json()["id"]
    await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("a.txt", b"The ferry leaves at six.")})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    calls: list[str] = []
    dense, sparse = container.embedding.embedder.embed_query, container.embedding.service.sparse.encode_query

    async def counted_dense(text: str) -> list[float]:  # the real model, counted
        calls.append("dense")
        return await dense(text)

    async def counted_sparse(text: str) -> dict[int, float]:
        calls.append("sparse")
        return await sparse(text)

    monkeypatch.setattr(container.embedding.embedder, "embed_query", counted_dense)
    monkeypatch.setattr(container.embedding.service.sparse, "encode_query", counted_sparse)
    body = {"query": "when does the ferry leave?"}
    first = (await client.post(f"/api/knowledge-bases/{kb}/search", json=body)).json()
    second = (await client.post(f"/api/knowledge-bases/{kb}/search", json=body)).json()
    assert first == second and first["results"]
    assert sorted(calls) == ["dense", "sparse"]
    await client.post(f"/api/knowledge-bases/{kb}/search", json={**body, "mode": "dense"})
    assert len(calls) == 2

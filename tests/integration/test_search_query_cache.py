"""Repeated queries are not embedded again (a bounded per-process LRU), and the cache never changes
what a search returns. It is kept per knowledge base: another knowledge base's readers cannot tell
from a search's speed that a query was asked before (docs/security.md)."""

from __future__ import annotations

from uuid import uuid4

import httpx

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.search import QueryCache


def test_query_cache_is_bounded_and_least_recently_used() -> None:
    kb = uuid4()
    cache = QueryCache(2)
    cache.put((kb, "dense", "a"), (1.0,))
    cache.put((kb, "dense", "b"), (2.0,))
    assert cache.get((kb, "dense", "a")) == (1.0,)  # a is now the most recent
    cache.put((kb, "dense", "c"), (3.0,))
    assert cache.get((kb, "dense", "b")) is None and cache.get((kb, "dense", "a")) == (1.0,)
    assert cache.get((uuid4(), "dense", "a")) is None  # another knowledge base: its own entries
    off = QueryCache(0)
    off.put((kb, "dense", "a"), (1.0,))
    assert off.get((kb, "dense", "a")) is None


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

    pair = container.embedding.service.sparse.encode_query_pair

    async def counted_pair(text: str) -> tuple[list[float], dict[int, float]]:  # both vectors, one pass
        calls.append("pair")
        return await pair(text)

    monkeypatch.setattr(container.embedding.embedder, "embed_query", counted_dense)
    monkeypatch.setattr(container.embedding.service.sparse, "encode_query", counted_sparse)
    monkeypatch.setattr(container.embedding.service.sparse, "encode_query_pair", counted_pair)
    body = {"query": "when does the ferry leave?"}
    first = (await client.post(f"/api/knowledge-bases/{kb}/search", json=body)).json()
    second = (await client.post(f"/api/knowledge-bases/{kb}/search", json=body)).json()
    assert first == second and first["results"]
    assert calls == ["pair"]  # the local model gives the query's two vectors from one call
    await client.post(f"/api/knowledge-bases/{kb}/search", json={**body, "mode": "dense"})
    assert len(calls) == 1

    # the same query in another knowledge base is embedded again: the earlier one's cache entry is
    # not shared, so no timing difference can tell that knowledge base's readers it was asked
    other = (await client.post("/api/knowledge-bases", json={"name": "other tenant"})).json()["id"]
    await client.post(f"/api/knowledge-bases/{other}/search", json=body)
    assert calls == ["pair", "pair"]
    await client.post(f"/api/knowledge-bases/{other}/search", json=body)
    assert len(calls) == 2

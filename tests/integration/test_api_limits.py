"""Bounded lists and bounded work: chunks come in pages, a key whose random prefix is taken is drawn
again (not a 500), and search queries are embedded side by side rather than one at a time."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.postgres import api_keys
from ultimate_rag.domain.auth import generate_key

from .test_api import make_kb, process_all, upload


async def test_chunks_come_in_pages(client: httpx.AsyncClient, container) -> None:
    kb = await make_kb(client)
    md = "\n\n".join(f"# Section {i}\n\nParagraph number {i} talks about topic {i} alone." for i in range(12))
    doc = (await upload(client, kb, "many.md", md.encode(), "text/markdown")).json()["id"]
    await process_all(container)
    total = (await client.get(f"/api/documents/{doc}")).json()["chunk_count"]
    assert total >= 6
    seen: list[int] = []
    params: dict[str, str | int] = {"limit": 5}
    while True:
        page = (await client.get(f"/api/documents/{doc}/chunks", params=params)).json()
        assert len(page["items"]) <= 5
        seen += [c["ordinal"] for c in page["items"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == list(range(total))
    # a page is never larger than the server allows, whatever the client asks for
    container.settings.max_chunks_page = 4
    page = (await client.get(f"/api/documents/{doc}/chunks", params={"limit": 1000})).json()
    assert len(page["items"]) == 4 and page["next_cursor"] == "3"
    r = await client.get(f"/api/documents/{doc}/chunks", params={"cursor": "not-a-number"})
    assert r.status_code == 422


async def test_a_taken_key_prefix_is_drawn_again(client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    first = (await client.post("/api/keys", json={"admin": True})).json()["record"]["prefix"]
    draws = iter([(f"urk_{first}_collides", first)])  # the random draw is forced once: it cannot be made to collide

    def drawn() -> tuple[str, str]:
        return next(draws, None) or generate_key()

    monkeypatch.setattr(api_keys, "generate_key", drawn)
    r = await client.post("/api/keys", json={"admin": True})
    assert r.status_code == 201, r.text
    assert r.json()["record"]["prefix"] != first
    assert (await client.get("/api/knowledge-bases", headers={"Authorization": f"Bearer {r.json()['key']}"})
            ).status_code == 200


async def test_search_queries_are_embedded_side_by_side() -> None:
    embedder = LocalE5Embedder(query_concurrency=2)
    model = embedder._get()
    together = threading.Barrier(2, timeout=120)  # passes only when two queries are inside the model at once
    real = model.query

    def query(text):
        together.wait()
        return real(text)

    model.query = query
    a, b = await asyncio.gather(embedder.embed_query("harbour tides"), embedder.embed_query("night berthing"))
    assert len(a) == len(b) == 384 and a != b

"""The OpenAI-compatible embedder and chat model keep one httpx client per event loop: a client's
connections belong to the loop that opened them (tests and CLI runs start new loops)."""

from __future__ import annotations

import asyncio

import httpx

from ultimate_rag.adapters.http.loop_client import LoopClient


def test_one_client_per_loop_and_closed_on_aclose() -> None:
    made: list[httpx.AsyncClient] = []

    def make() -> httpx.AsyncClient:
        made.append(httpx.AsyncClient())
        return made[-1]

    clients = LoopClient(make)

    async def twice() -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
        return clients.get(), clients.get()

    first, again = asyncio.run(twice())
    assert first is again and len(made) == 1  # the same loop reuses its client
    second, _ = asyncio.run(twice())
    assert second is not first and len(made) == 2  # a new loop gets its own

    async def close() -> None:
        await clients.aclose()

    asyncio.run(close())
    assert second.is_closed
    asyncio.run(close())  # closing again is harmless

"""An ``httpx.AsyncClient`` made on first use and remade when the running event loop changes (its
connections belong to the loop that opened them: tests and CLI runs start new loops)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx


class LoopClient:
    def __init__(self, make: Callable[[], httpx.AsyncClient]) -> None:
        """``make``: builds the client (and anything else tied to the loop, such as a semaphore)."""
        self._make = make
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._make()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

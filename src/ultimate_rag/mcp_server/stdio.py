"""``ultimate-rag mcp``: the MCP server over stdio for desktop agents, talking to a running server
over HTTP with one key (``--url``/``ULTIMATE_RAG_URL``, ``--key``/``ULTIMATE_RAG_API_KEY``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from mcp.server.mcpserver import Context

from ..client import AsyncClient
from .tools import build_server


def run_stdio(url: str, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(url, key) as rag:
            @asynccontextmanager
            async def client_for(_: Context) -> AsyncIterator[AsyncClient]:
                yield rag

            await build_server(client_for, local_files=True).run_stdio_async()

    anyio.run(main)

"""The MCP Streamable HTTP transport, served by the API at ``/mcp``.

The bearer key is checked before anything else (like every ``/api`` route, and before any body is
read); then each tool calls the API in-process with that same key, so the scopes, the 404-not-403
rule and the audit log are the REST API's own. Stateless (JSON answers, no session held in the
process): any API process can answer any request, as with REST."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from ..client import AsyncClient, RetryPolicy
from ..domain.auth import same_secret
from ..domain.errors import UltimateRagError
from .tools import build_server

PATH = "/mcp"


class McpEndpoint:
    """An ASGI app (a class, so the router passes it the raw request)."""

    def __init__(self, api: FastAPI) -> None:
        self.api = api

        @asynccontextmanager
        async def client_for(ctx: Context) -> AsyncIterator[AsyncClient]:
            headers = {"Authorization": (ctx.headers or {}).get("authorization", "")}
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://mcp.internal", headers=headers,
                                         timeout=60.0) as http:
                yield AsyncClient(http=http, retry=RetryPolicy(retries=0))

        self.server = build_server(client_for, local_files=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        refusal = await self._refusal(scope)
        if refusal is not None:
            await _json(send, 401, refusal, {"www-authenticate": "Bearer"})
            return
        # stateless: a fresh manager per request, so nothing lives between requests (and no lifespan is needed)
        manager = StreamableHTTPSessionManager(app=self.server._lowlevel_server, stateless=True, json_response=True)
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    async def _refusal(self, scope: dict[str, Any]) -> str | None:
        """Why the key is refused (None: it is valid). The same check as ``api.deps.principal``, on the
        raw header, so nothing of the body is read first."""
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, key = header.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            return "missing API key: send Authorization: Bearer <key>"
        container = self.api.state.container
        if container.settings.admin_key and same_secret(key, container.settings.admin_key):
            return None
        try:
            found = await container.access.api_keys.authenticate(key)
        except UltimateRagError as exc:
            return exc.message
        return None if found is not None else "invalid API key"

async def _json(send: Any, status: int, detail: str, headers: dict[str, str]) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
           *((k.encode(), v.encode()) for k, v in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def mount_mcp(app: FastAPI) -> None:
    """``/mcp`` on the API, outside the OpenAPI schema (it is JSON-RPC, not REST)."""
    app.add_route(PATH, McpEndpoint(app), include_in_schema=False)  # type: ignore[arg-type]

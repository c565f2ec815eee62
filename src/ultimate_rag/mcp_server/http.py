"""The MCP Streamable HTTP transport, served by the API at ``/mcp``.

The bearer key is checked before anything else (like every ``/api`` route, and before any body is
read); then each tool calls the API in-process with that same key, so the scopes, the 404-not-403
rule and the audit log are the REST API's own. Stateless (JSON answers, no session held in the
process): any API process can answer any request, as with REST.

Bounded as ``/api`` is: a tool's in-process call ends after ``CALL_TIMEOUT_SECONDS`` (the HTTP
client's timeouts do not apply in-process), and a GET stream (the SDK's server-to-client channel)
counts toward the key's streams with ``/events`` (``max_event_streams_per_key``), ends after
``STREAM_SECONDS`` and when its key is revoked or expires (checked every
``event_stream_key_check_seconds``)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from fastapi import FastAPI, HTTPException
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from ..api.deps import authenticate, still_valid
from ..api.gate import refuse_unchecked_key
from ..api.slots import stream_slots
from ..bootstrap import Container
from ..client import AsyncClient, RetryPolicy
from ..domain.auth import Principal
from ..domain.errors import AuthenticationError
from .tools import build_server

PATH = "/mcp"
CALL_TIMEOUT_SECONDS = 60.0  # one tool's calls to the API, in all
STREAM_SECONDS = 25.0  # a GET stream ends after this (as /events by default): the client connects again
log = logging.getLogger(__name__)


class McpEndpoint:
    """An ASGI app (a class, so the router passes it the raw request)."""

    def __init__(self, api: FastAPI) -> None:
        self.api = api

        @asynccontextmanager
        async def client_for(ctx: Context) -> AsyncIterator[AsyncClient]:
            headers = {"Authorization": (ctx.headers or {}).get("authorization", "")}
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://mcp.internal", headers=headers,
                                         timeout=CALL_TIMEOUT_SECONDS) as http:
                yield AsyncClient(http=http, retry=RetryPolicy(retries=0))

        self.server = build_server(client_for, local_files=False, call_timeout=CALL_TIMEOUT_SECONDS)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        container: Container = self.api.state.container
        header = dict(scope.get("headers") or []).get(b"authorization")
        try:
            who = await authenticate(container.access.api_keys, container.settings,
                                     header.decode("latin-1") if header is not None else None)
        except AuthenticationError as exc:
            await _json(send, 401, exc.message, {"www-authenticate": "Bearer"})
            return
        except Exception as exc:  # the database is down: the same answer as the /api gate's
            await refuse_unchecked_key(send, exc)
            return
        if scope.get("method") == "GET":
            await self._stream(scope, receive, send, who, container)
        else:
            await self._handle(scope, receive, send)

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # stateless: a fresh manager per request, so nothing lives between requests (and no lifespan is needed)
        manager = StreamableHTTPSessionManager(app=self.server._lowlevel_server, stateless=True, json_response=True)
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    async def _stream(self, scope: dict[str, Any], receive: Any, send: Any, who: Principal,
                      container: Container) -> None:
        """A GET stream under the limits of ``/events``; when it ends, the response is finished here."""
        settings = container.settings
        try:
            release = stream_slots(self.api.state, settings).take(who.key_prefix)
        except HTTPException as exc:
            await _json(send, exc.status_code, str(exc.detail), dict(exc.headers or {}))
            return
        started = finished = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        async def guard(scope_: anyio.CancelScope) -> None:
            with anyio.move_on_after(STREAM_SECONDS):
                try:
                    while True:
                        if not await still_valid(container.access.api_keys, settings, who):
                            break
                        await anyio.sleep(settings.event_stream_key_check_seconds)
                except Exception:  # the key cannot be checked (the database is down): the stream ends
                    log.warning("an MCP stream's key could not be checked; the stream ends", exc_info=True)
            scope_.cancel()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(guard, group.cancel_scope)
                await self._handle(scope, receive, tracked)
                group.cancel_scope.cancel()
        finally:
            release()
        if started and not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _json(send: Any, status: int, detail: str, headers: dict[str, str]) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
           *((k.lower().encode(), v.encode()) for k, v in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def mount_mcp(app: FastAPI) -> None:
    """``/mcp`` on the API, outside the OpenAPI schema (it is JSON-RPC, not REST)."""
    app.add_route(PATH, McpEndpoint(app), include_in_schema=False)  # type: ignore[arg-type]  # an ASGI app where Starlette types a request handler

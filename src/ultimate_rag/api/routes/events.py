"""Live document changes of one knowledge base as server-sent events (``text/event-stream``).

Fed by PostgreSQL LISTEN/NOTIFY (migration 0003, one LISTEN connection per API process, see
``adapters/postgres/events.py``). Authenticated like every ``/api`` route, with the
``Authorization: Bearer`` header: the workbench reads the stream with ``fetch()`` (not
``EventSource``, which cannot send headers), so no key or token ever appears in a URL.

Events (``data`` is JSON):
- ``ready``    ``{"mode": "listen"}`` once, when the stream starts;
- ``document`` ``{"id", "status", "op"}`` for each change (``op`` I/U/D; status ``REMOVED`` when the
  row is gone) — fetch the document for the details;
- ``resync``   the client fell behind or the listener was lost: reload the list;
- ``fallback`` ``{"mode": "poll", "interval": 5}``: LISTEN is unavailable, poll the list instead;
- ``reconnect`` the stream ends after ``max_seconds`` (default 25, so that a server can always shut
  down promptly): connect again and reload the list to cover the gap;
- ``unauthorized`` ``{"detail"}``: the key was revoked or expired while streaming (it is re-checked
  every ``event_stream_key_check_seconds``); the stream ends.
A comment line is sent every few seconds as a keep-alive. Each API process serves at most
``max_event_streams`` streams at once, ``max_event_streams_per_key`` per key (GET ``/mcp`` streams
count with them, ``api/slots.py``); beyond that: 429 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from ...domain.errors import EventsUnavailable
from ..deps import ApiKeysDep, EventsDep, PrincipalDep, ReadableKB, SettingsDep, principal, still_valid
from ..schemas import ERROR_RESPONSES, body_of, error_response
from ..slots import stream_slots
from ..sse import sse_frame

router = APIRouter(prefix="/api/knowledge-bases", tags=["knowledge bases"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)

KEEPALIVE_SECONDS = 10.0
POLL_INTERVAL_SECONDS = 5


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return sse_frame(event, data).encode()


@router.get("/{kb_id}/events", response_class=StreamingResponse,
            responses={**body_of("text/event-stream", "server-sent events: document changes in this knowledge base",
                                 {"type": "string"}),
                       429: error_response("too many event streams open (for this key or on this server)")})
async def knowledge_base_events(
    kb: ReadableKB, request: Request, hub: EventsDep, api_keys: ApiKeysDep, settings: SettingsDep, who: PrincipalDep,
    max_seconds: Annotated[int, Query(ge=1, le=60, description="end the stream after this many seconds")] = 25,
) -> StreamingResponse:
    stream_seconds = float(max_seconds)
    check_seconds = settings.event_stream_key_check_seconds
    release = stream_slots(request.app.state, settings).take(who.key_prefix)

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"retry: 3000\n\n"
            async with hub.subscribe(kb.id) as sub:
                yield _frame("ready", {"mode": "listen"})
                loop = asyncio.get_running_loop()
                deadline = loop.time() + stream_seconds
                next_check = last_write = loop.time()
                while True:
                    now = loop.time()
                    if now >= deadline:
                        yield _frame("reconnect", {})
                        return
                    if now >= next_check:
                        if not await still_valid(api_keys, settings, who):
                            yield _frame("unauthorized", {"detail": "the API key was revoked or has expired"})
                            return
                        next_check = now + check_seconds
                    if now - last_write >= KEEPALIVE_SECONDS:
                        yield b": keep-alive\n\n"
                        last_write = now
                    wait = min(deadline, next_check, last_write + KEEPALIVE_SECONDS) - now
                    try:
                        event = await asyncio.wait_for(sub.queue.get(), timeout=max(wait, 0.01))
                    except TimeoutError:
                        continue
                    if event.get("type") == "lost" or sub.overflowed:
                        yield _frame("resync", {})
                        return
                    yield _frame("document", {k: event[k] for k in ("id", "status", "op")})
                    last_write = loop.time()
        except EventsUnavailable:
            yield _frame("fallback", {"mode": "poll", "interval": POLL_INTERVAL_SECONDS})
        finally:
            release()

    return StreamingResponse(stream(), media_type="text/event-stream", background=BackgroundTask(release),
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

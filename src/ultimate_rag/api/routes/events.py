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
  down promptly): connect again and reload the list to cover the gap.
A comment line is sent every few seconds as a keep-alive.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from ...adapters.postgres.events import DocumentEventHub, EventsUnavailable
from ..deps import ContainerDep, ReadableKB, principal
from ..schemas import ERROR_RESPONSES, body_of

router = APIRouter(prefix="/api/knowledge-bases", tags=["knowledge bases"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)

KEEPALIVE_SECONDS = 10.0
POLL_INTERVAL_SECONDS = 5


def hub_of(request: Request, container: Any) -> DocumentEventHub:
    hub: DocumentEventHub | None = getattr(request.app.state, "document_events", None)
    if hub is None:
        hub = DocumentEventHub(container.db.url)
        request.app.state.document_events = hub
    return hub


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@router.get("/{kb_id}/events", response_class=StreamingResponse,
            responses=body_of("text/event-stream", "server-sent events: document changes in this knowledge base",
                              {"type": "string"}))
async def knowledge_base_events(
    kb: ReadableKB, request: Request, container: ContainerDep,
    max_seconds: Annotated[int, Query(ge=1, le=60, description="end the stream after this many seconds")] = 25,
) -> StreamingResponse:
    hub = hub_of(request, container)
    stream_seconds = float(max_seconds)

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 3000\n\n"
        try:
            async with hub.subscribe(kb.id) as sub:
                yield _frame("ready", {"mode": "listen"})
                loop = asyncio.get_running_loop()
                deadline = loop.time() + stream_seconds
                while True:
                    left = deadline - loop.time()
                    if left <= 0:
                        yield _frame("reconnect", {})
                        return
                    try:
                        event = await asyncio.wait_for(sub.queue.get(), timeout=min(KEEPALIVE_SECONDS, left))
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    if event.get("type") == "lost" or sub.overflowed:
                        yield _frame("resync", {})
                        return
                    yield _frame("document", {k: event[k] for k in ("id", "status", "op")})
        except EventsUnavailable:
            yield _frame("fallback", {"mode": "poll", "interval": POLL_INTERVAL_SECONDS})

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

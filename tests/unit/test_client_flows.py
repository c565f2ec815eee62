"""The sync and async clients run the same flows (``client/_flows.py``): retries, paging and the
event stream behave alike in both. The answers come from httpx.MockTransport: a server that answers
503 on demand, or sends events in an order the test chooses, cannot be produced here on demand."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx

from ultimate_rag.client import AsyncClient, Client, TransportError
from ultimate_rag.client._core import RetryPolicy

DOC = {"id": "d1", "knowledge_base_id": "kb", "filename": "a.md", "sha256": "x", "status": "PENDING"}
NO_WAIT = RetryPolicy(retries=3, backoff_seconds=0.0)
Handler = Callable[[httpx.Request], httpx.Response]


def run_both(server: Callable[[], Handler], work: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``work`` called on a sync and on an async client, each talking to a fresh fake server: what
    each returned, or the exception it raised."""
    def sync() -> Any:
        with Client(http=httpx.Client(transport=httpx.MockTransport(server()), base_url="http://fake"),
                    retry=NO_WAIT) as rag:
            return getattr(rag, work)(*args, **kwargs)

    async def go() -> Any:
        async with AsyncClient(http=httpx.AsyncClient(transport=httpx.MockTransport(server()),
                                                      base_url="http://fake"), retry=NO_WAIT) as rag:
            return await getattr(rag, work)(*args, **kwargs)

    outcomes = []
    for call in (sync, lambda: asyncio.run(go())):
        try:
            outcomes.append(call())
        except Exception as exc:
            outcomes.append(exc)
    return outcomes[0], outcomes[1]


def test_a_busy_server_is_asked_again_after_its_retry_after() -> None:
    seen: list[int] = []

    def server() -> Handler:
        answers = iter([httpx.Response(503, json={"detail": "busy"}, headers={"retry-after": "0"}),
                        httpx.Response(200, json=DOC)])

        def handle(request: httpx.Request) -> httpx.Response:
            seen.append(1)
            return next(answers)
        return handle

    sync_doc, async_doc = run_both(server, "get_document", "d1")
    assert sync_doc == async_doc and sync_doc.id == "d1"
    assert len(seen) == 4  # 503, then 200, for each client


def test_a_broken_connection_is_retried_only_for_idempotent_calls() -> None:
    calls: list[str] = []

    def server() -> Handler:
        tries = iter([False, True])

        def handle(request: httpx.Request) -> httpx.Response:
            calls.append(request.method)
            if not next(tries, True):
                raise httpx.ReadError("connection reset", request=request)
            return httpx.Response(200, json=DOC)
        return handle

    failed = run_both(server, "delete_document", "d1")  # not idempotent: one try, then the error
    assert all(isinstance(e, TransportError) and "the connection failed" in str(e) for e in failed)
    assert calls == ["DELETE"] * 2
    calls.clear()
    sync_doc, async_doc = run_both(server, "get_document", "d1")
    assert sync_doc.id == async_doc.id == "d1" and calls == ["GET"] * 4


def test_both_clients_page_through_a_listing() -> None:
    pages = {None: (["d1", "d2"], "c1"), "c1": (["d3"], None)}

    def handle(request: httpx.Request) -> httpx.Response:
        ids, cursor = pages[request.url.params.get("cursor")]
        return httpx.Response(200, json={"items": [{**DOC, "id": i} for i in ids], "next_cursor": cursor})

    def listed(rag: Client) -> list[str]:
        return [d.id for d in rag.iter_documents("kb", page_size=2)]

    async def alisted(rag: AsyncClient) -> list[str]:
        return [d.id async for d in rag.iter_documents("kb", page_size=2)]

    with Client(http=httpx.Client(transport=httpx.MockTransport(handle), base_url="http://fake")) as rag:
        assert listed(rag) == ["d1", "d2", "d3"]

    async def go() -> list[str]:
        async with AsyncClient(http=httpx.AsyncClient(transport=httpx.MockTransport(handle),
                                                      base_url="http://fake")) as rag:
            return await alisted(rag)

    assert asyncio.run(go()) == ["d1", "d2", "d3"]


def test_the_wait_follows_the_event_stream() -> None:
    events = [("ready", {"mode": "listen"}), ("document", {"id": "other"}), ("document", {"id": "d1"})]
    seen: list[str] = []

    def server() -> Handler:
        statuses = iter(["PENDING", "PARSING", "READY"])

        def handle(request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path)
            if request.url.path == "/api/documents/d1":
                return httpx.Response(200, json={**DOC, "status": next(statuses, "READY")})
            body = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events)
            return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
        return handle

    updates: list[str] = []
    results = run_both(server, "wait_until_ready", ["d1"], poll_interval=3600, timeout=30,
                       on_update=lambda d: updates.append(d.status))
    assert [docs[0].status for docs in results] == ["READY", "READY"]
    assert updates == ["PENDING", "PARSING", "READY"] * 2
    # per client: the first read, one stream, a refresh on "ready" and one on d1's event; no polling
    assert seen == ["/api/documents/d1", "/api/knowledge-bases/kb/events", "/api/documents/d1",
                    "/api/documents/d1"] * 2

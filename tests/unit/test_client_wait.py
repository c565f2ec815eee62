"""``wait_until_ready`` falls back to polling when the server has no event stream. A server whose
LISTEN connection is unavailable cannot be produced here, so a small fake of the two endpoints
(httpx.MockTransport) answers like one: the stream says ``fallback``, or the route is missing."""

from __future__ import annotations

import httpx
import pytest

from ultimate_rag.client import AsyncClient, Client
from ultimate_rag.client.aio import LIST_ABOVE

DOC = {"id": "d1", "knowledge_base_id": "kb", "filename": "a.md", "sha256": "x", "status": "PENDING"}


def fake_server(events: httpx.Response) -> tuple[httpx.MockTransport, list[str]]:
    seen: list[str] = []
    statuses = iter(["PENDING", "PARSING", "EMBEDDING", "READY"])

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/api/documents/d1":
            return httpx.Response(200, json={**DOC, "status": next(statuses, "READY")})
        if request.url.path == "/api/knowledge-bases/kb/events":
            return events
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.MockTransport(handle), seen


@pytest.mark.parametrize("events", [
    httpx.Response(200, text='event: ready\ndata: {"mode":"listen"}\n\nevent: fallback\ndata: {"mode":"poll"}\n\n',
                   headers={"content-type": "text/event-stream"}),
    httpx.Response(404, json={"detail": "Not Found"}),  # a server older than the event stream
])
def test_sync_wait_polls_without_an_event_stream(events: httpx.Response) -> None:
    transport, seen = fake_server(events)
    updates: list[str] = []
    with Client(http=httpx.Client(transport=transport, base_url="http://fake")) as rag:
        [doc] = rag.wait_until_ready(["d1"], poll_interval=0, timeout=30, on_update=lambda d: updates.append(d.status))
    assert doc.status == "READY" and updates[-1] == "READY"
    assert seen.count("/api/knowledge-bases/kb/events") == 1  # asked once, then polled


async def test_async_wait_polls_without_an_event_stream() -> None:
    transport, _ = fake_server(httpx.Response(404, json={"detail": "Not Found"}))
    async with AsyncClient(http=httpx.AsyncClient(transport=transport, base_url="http://fake")) as rag:
        [doc] = await rag.wait_until_ready(["d1"], poll_interval=0, timeout=30)
    assert doc.status == "READY"


def test_many_documents_are_refreshed_with_the_list_endpoint() -> None:
    ids = [f"d{i}" for i in range(LIST_ABOVE + 5)]
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path.startswith("/api/documents/"):
            return httpx.Response(200, json={**DOC, "id": request.url.path.rsplit("/", 1)[1]})
        if request.url.path == "/api/knowledge-bases/kb/documents":
            return httpx.Response(200, json={"items": [{**DOC, "id": i, "status": "READY"} for i in ids],
                                             "next_cursor": None, "counts": {"READY": len(ids)}})
        return httpx.Response(200, text='event: ready\ndata: {"mode":"listen"}\n\n',
                              headers={"content-type": "text/event-stream"})

    with Client(http=httpx.Client(transport=httpx.MockTransport(handle), base_url="http://fake")) as rag:
        done = rag.wait_until_ready(ids, poll_interval=3600, timeout=30)
    assert {d.status for d in done} == {"READY"}
    assert seen.count("/api/knowledge-bases/kb/documents") == 1 and len(seen) == len(ids) + 2

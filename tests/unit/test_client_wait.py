"""``wait_until_ready`` falls back to polling when the server has no event stream. A server whose
LISTEN connection is unavailable cannot be produced here, so a small fake of the two endpoints
(httpx.MockTransport) answers like one: the stream says ``fallback``, or the route is missing."""

from __future__ import annotations

from collections.abc import Callable

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


def test_both_clients_wait_through_a_server_that_restarts() -> None:
    """The server goes away (connections refused) while the event stream is opened and again while
    the wait catches up: it reconnects with backoff, says so, and returns the documents."""
    from .test_client_flows import run_both

    def server() -> Callable[[httpx.Request], httpx.Response]:
        statuses = iter(["PENDING", "PARSING", "EMBEDDING", "READY"])
        refused = iter([False, True, True, False, True, False])  # per request: the server is down

        def handle(request: httpx.Request) -> httpx.Response:
            if next(refused, False):
                raise httpx.ConnectError("connection refused", request=request)
            if request.url.path == "/api/documents/d1":
                return httpx.Response(200, json={**DOC, "status": next(statuses, "READY")})
            return httpx.Response(200, text='event: ready\ndata: {"mode":"listen"}\n\n',
                                  headers={"content-type": "text/event-stream"})
        return handle

    said: list[str | None] = []
    results = run_both(server, "wait_until_ready", ["d1"], timeout=60, poll_interval=0,
                       on_connection=said.append)
    assert [docs[0].status for docs in results] == ["READY", "READY"]
    assert said[0] is not None and "cannot reach the server" in said[0] and said[1] is None
    assert said.count(None) >= 2  # back each time, in each client


def test_the_timeout_counts_time_without_change_not_time_in_all() -> None:
    """Progress every 0.1 s for 1.2 s with idle_timeout=0.5: the wait goes on; a document that does
    not move: it ends after 0.5 s without change, naming that."""
    import time

    def moving(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/documents/d1":
            done = min(12, int((time.monotonic() - start) * 10))
            status = "READY" if done >= 12 else "EMBEDDING"
            return httpx.Response(200, json={**DOC, "status": status, "progress": {"done": done, "total": 12}})
        return httpx.Response(404, json={"detail": "Not Found"})

    start = time.monotonic()
    with Client(http=httpx.Client(transport=httpx.MockTransport(moving), base_url="http://fake")) as rag:
        [doc] = rag.wait_until_ready(["d1"], timeout=30, idle_timeout=0.5, poll_interval=0.05)
    assert doc.status == "READY" and time.monotonic() - start >= 1.1

    def stuck(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/documents/d1":
            return httpx.Response(200, json={**DOC, "status": "PENDING"})
        return httpx.Response(404, json={"detail": "Not Found"})

    with Client(http=httpx.Client(transport=httpx.MockTransport(stuck), base_url="http://fake")) as rag:
        with pytest.raises(TimeoutError, match=r"1 document\(s\) not ready: nothing changed for 0.5s"):
            rag.wait_until_ready(["d1"], timeout=30, idle_timeout=0.5, poll_interval=0.05)


def test_an_answer_waits_longer_than_the_server_and_is_not_asked_twice() -> None:
    """The server may wait minutes for a local model and then answers 504 with its reason: the client
    reads that reason rather than timing out first, and a broken answer is not sent again (that
    would ask the model all over again)."""
    from ultimate_rag.adapters.llm.endpoints import LOCAL_TIMEOUT_SECONDS
    from ultimate_rag.client import ServerError, TransportError
    from ultimate_rag.client._core import ANSWER_TIMEOUT_SECONDS

    assert ANSWER_TIMEOUT_SECONDS > 2 * LOCAL_TIMEOUT_SECONDS  # a rewrite call and the answer, each up to it
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.ReadError("connection reset", request=request)
        return httpx.Response(504, json={"detail": "the language model at http://127.0.0.1:8080/v1 did not answer "
                                                   "within 300 s (ULTIMATE_RAG_LLM_TIMEOUT_SECONDS)"})

    with Client(http=httpx.Client(transport=httpx.MockTransport(handle), base_url="http://fake")) as rag:
        with pytest.raises(TransportError):
            rag.answer("kb", "when does the ferry leave?")
        assert len(seen) == 1 and seen[0].extensions["timeout"]["read"] == ANSWER_TIMEOUT_SECONDS
        with pytest.raises(ServerError) as failed:
            rag.answer("kb", "when does the ferry leave?")
    assert failed.value.status_code == 504 and "did not answer within 300 s" in str(failed.value)

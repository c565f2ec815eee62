"""The live document events of a knowledge base (``GET /api/knowledge-bases/{kb_id}/events``):
server-sent events fed by the documents trigger (migration 0003) through one LISTEN connection.
Served by a real uvicorn on a loopback port, because an in-memory transport buffers whole bodies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import httpx
import pytest
import uvicorn

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.adapters.postgres.events import APPLICATION_NAME
from ultimate_rag.domain.auth import Role
from ultimate_rag.testing.eventually import DEFAULT_TIMEOUT, eventually

from ..conftest import ADMIN_KEY
from .helpers import new_kb, queue_document


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def base_url(container) -> AsyncIterator[str]:
    from ultimate_rag.api.app import create_app

    app = create_app(container=container)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, what="the server started")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=40)
        hub = getattr(app.state, "document_events", None)
        if hub is not None:
            await hub.close()


class Stream:
    """Reads SSE frames in the background into a queue of (event, data)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.frames: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        buffer = ""
        async for text in self.response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                event, data = "message", ""
                for line in frame.split("\n"):
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data += line[5:].strip()
                if data:
                    await self.frames.put((event, json.loads(data)))

    async def next(self, event: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        async def wait() -> dict[str, Any]:
            while True:
                name, data = await self.frames.get()
                if name == event:
                    return data
        return await asyncio.wait_for(wait(), timeout)

    async def documents_until(self, document_id: UUID, status: str, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []

        async def wait() -> list[dict[str, Any]]:
            while True:
                name, data = await self.frames.get()
                if name == "document":
                    seen.append(data)
                    if data["id"] == str(document_id) and data["status"] == status:
                        return seen
        return await asyncio.wait_for(wait(), timeout)


@contextlib.asynccontextmanager
async def events(base: str, kb: UUID, key: str = ADMIN_KEY, **params: Any) -> AsyncIterator[Stream]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http, http.stream(
        "GET", f"/api/knowledge-bases/{kb}/events", headers={"Authorization": f"Bearer {key}"}, params=params,
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = Stream(response)
        try:
            assert (await stream.next("ready")) == {"mode": "listen"}
            yield stream
        finally:
            stream.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await stream.task


async def test_an_upload_and_its_status_changes_arrive_as_events(container, base_url: str) -> None:
    kb = await new_kb(container)
    async with events(base_url, kb) as stream:
        async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            r = await http.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("a.md", b"# A\n\ntext\n")})
            assert r.status_code == 202
            doc = r.json()["id"]
            created = await stream.documents_until(UUID(doc), "PENDING")
            assert created[-1]["op"] == "I"
            assert (await http.post(f"/api/documents/{doc}/fail")).status_code == 200
            await stream.documents_until(UUID(doc), "FAILED")


async def test_every_writer_is_covered_not_only_the_api(container, base_url: str) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    async with events(base_url, kb) as stream:
        # as a worker (or a person with psql) would: progress, then status
        await container.infra.db.execute(
            "UPDATE documents SET progress = '{\"stage\": \"EMBEDDING\", \"done\": 1, \"total\": 2}' WHERE id = %s",
            (doc,))
        await container.infra.db.execute("UPDATE documents SET status = 'PARSING' WHERE id = %s", (doc,))
        seen = await stream.documents_until(doc, "PARSING")
        assert [e["status"] for e in seen if e["id"] == str(doc)] == ["PENDING", "PARSING"]  # progress, then status
        await container.infra.db.execute("DELETE FROM documents WHERE id = %s", (doc,))
        gone = await stream.documents_until(doc, "REMOVED")
        assert gone[-1]["op"] == "D"


async def test_an_update_that_changes_nothing_visible_is_not_sent(container, base_url: str) -> None:
    kb = await new_kb(container)
    noisy, marker = await queue_document(container, kb), await queue_document(container, kb)
    async with events(base_url, kb) as stream:
        await container.infra.db.execute("UPDATE documents SET stage_timings = stage_timings WHERE id = %s", (noisy,))
        await container.infra.db.execute("UPDATE documents SET status = 'PARSING' WHERE id = %s", (marker,))
        seen = await stream.documents_until(marker, "PARSING")
        assert [e["id"] for e in seen] == [str(marker)]


async def test_events_of_another_knowledge_base_never_leak(container, base_url: str) -> None:
    a, b = await new_kb(container, "events-a"), await new_kb(container, "events-b")
    async with events(base_url, a) as stream_a, events(base_url, b) as stream_b:
        in_b = [await queue_document(container, b) for _ in range(3)]
        in_a = await queue_document(container, a)
        seen_a = await stream_a.documents_until(in_a, "PENDING")
        assert {e["id"] for e in seen_a} == {str(in_a)}
        seen_b = await stream_b.documents_until(in_b[-1], "PENDING")
        assert str(in_a) not in {e["id"] for e in seen_b}


async def test_auth_is_enforced(container, base_url: str) -> None:
    a, b = await new_kb(container), await new_kb(container)
    keys = ApiKeyRepository(container.infra.db)
    reader_a = await keys.create(is_admin=False, scopes={a: Role.READER})
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        url = f"/api/knowledge-bases/{a}/events"
        assert (await http.get(url)).status_code == 401
        assert (await http.get(url, headers={"Authorization": "Bearer wrong-key"})).status_code == 401
        assert (await http.get(url, params={"key": ADMIN_KEY})).status_code == 401  # never a key in the URL
        other = await http.get(f"/api/knowledge-bases/{b}/events", headers={"Authorization": f"Bearer {reader_a}"})
        assert other.status_code == 404 and str(b) not in other.text
    async with events(base_url, a, key=reader_a) as stream:  # a reader of A may watch A
        doc = await queue_document(container, a)
        await stream.documents_until(doc, "PENDING")


async def test_the_stream_ends_after_max_seconds_and_asks_to_reconnect(container, base_url: str) -> None:
    kb = await new_kb(container)
    async with events(base_url, kb, max_seconds=1) as stream:
        assert await stream.next("reconnect") == {}


async def test_without_listen_the_client_is_told_to_poll(container, base_url: str, monkeypatch) -> None:
    from ultimate_rag.adapters.postgres.events import DocumentEventHub
    from ultimate_rag.domain.errors import EventsUnavailable

    async def refuse(self: DocumentEventHub) -> None:
        raise EventsUnavailable("no LISTEN through this pooler")

    monkeypatch.setattr(DocumentEventHub, "_start", refuse)
    kb = await new_kb(container)
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        r = await http.get(f"/api/knowledge-bases/{kb}/events", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert r.status_code == 200
    assert "event: fallback" in r.text and '"mode":"poll"' in r.text


async def test_one_listen_connection_serves_all_subscribers_and_closes_with_the_last(container) -> None:
    from ultimate_rag.adapters.postgres.events import DocumentEventHub

    hub = DocumentEventHub(container.infra.db.url)
    kb = await new_kb(container)

    async def listeners() -> int:
        row = await container.infra.db.fetchone(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            (APPLICATION_NAME,))
        return int(row["n"]) if row else 0

    async with hub.subscribe(kb) as one, hub.subscribe(kb) as two:
        assert hub.subscriber_count == 2 and await listeners() == 1
        doc = await queue_document(container, kb)
        for sub in (one, two):
            event = await asyncio.wait_for(sub.queue.get(), DEFAULT_TIMEOUT)
            assert event["id"] == str(doc) and event["status"] == "PENDING"
    assert hub.subscriber_count == 0
    await eventually(listeners, lambda n: n == 0, what="LISTEN connections left")


async def test_a_lost_listen_connection_tells_subscribers_to_resync(container) -> None:
    from ultimate_rag.adapters.postgres.events import DocumentEventHub

    hub = DocumentEventHub(container.infra.db.url)
    kb = await new_kb(container)
    async with hub.subscribe(kb) as sub:
        await container.infra.db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s", (APPLICATION_NAME,))
        assert (await asyncio.wait_for(sub.queue.get(), DEFAULT_TIMEOUT)) == {"type": "lost"}
        assert sub.lost
    async with hub.subscribe(kb) as again:  # the next subscriber gets a fresh connection
        doc = await queue_document(container, kb)
        assert (await asyncio.wait_for(again.queue.get(), DEFAULT_TIMEOUT))["id"] == str(doc)
    await hub.close()


async def test_the_workbench_filename_filter_keeps_keyset_pagination(client: httpx.AsyncClient, container) -> None:
    kb = await new_kb(container)
    for i in range(5):
        await queue_document(container, kb, f"text {i}", filename=f"report_{i}.txt")
    await queue_document(container, kb, "other", filename="reportX1.txt")  # `_` is no wildcard
    await queue_document(container, kb, "other", filename="notes.md")
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"q": "REPORT_", "limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get(f"/api/knowledge-bases/{kb}/documents", params=params)).json()
        seen += [d["filename"] for d in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == [f"report_{i}.txt" for i in range(5)]
    assert len(seen) == len(set(seen))
    r = await client.get(f"/api/knowledge-bases/{kb}/documents", params={"q": "100%"})
    assert r.status_code == 200 and r.json()["items"] == []
    assert (await client.get(f"/api/knowledge-bases/{kb}/documents", params={"q": "a\x00b"})).status_code == 400


async def test_the_workbench_list_answers_right_at_100k_documents(client: httpx.AsyncClient, container) -> None:
    """What the documents table asks for — a page, a deep page, a status filter, a file-name search,
    with the status counts each time — answers right in a knowledge base of 100k documents (how
    fast: ``bench/suite_timings.py``, in bench/RESULTS.md)."""
    kb = await new_kb(container)
    await seed_documents(container.infra.db, kb, 100_000)
    url = f"/api/knowledge-bases/{kb}/documents"

    async def get(params: dict[str, Any]) -> dict[str, Any]:
        r = await client.get(url, params=params)
        assert r.status_code == 200, r.text
        return r.json()

    page = await get({"limit": 50})
    assert len(page["items"]) == 50 and sum(page["counts"].values()) == 100_000
    cursor, seen = page["next_cursor"], [d["id"] for d in page["items"]]
    for _ in range(3):  # follow the cursor
        page = await get({"limit": 50, "cursor": cursor})
        cursor, seen = page["next_cursor"], seen + [d["id"] for d in page["items"]]
    assert len(seen) == len(set(seen)) == 200
    row = await container.infra.db.fetchone(
        "SELECT created_at, id FROM documents WHERE knowledge_base_id = %s ORDER BY created_at DESC, id DESC"
        " OFFSET 99000 LIMIT 1", (kb,))
    from ultimate_rag.adapters.postgres.documents import encode_cursor

    page = await get({"limit": 50, "cursor": encode_cursor(row["created_at"], row["id"])})
    assert len(page["items"]) == 50
    assert {d["status"] for d in (await get({"limit": 50, "status": "FAILED"}))["items"]} == {"FAILED"}
    assert [d["filename"] for d in (await get({"limit": 50, "q": "file-99999."}))["items"]] == ["file-99999.md"]
    assert (await get({"limit": 50, "q": "no-such-name"}))["items"] == []


async def seed_documents(db, kb: UUID, n: int) -> None:
    """``n`` documents in one statement (also used by the bench): 3/5 READY, 1/5 FAILED, 1/5 PENDING."""
    await db.execute(
        "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key, status,"
        " created_at)"
        " SELECT gen_random_uuid(), %(kb)s, 'file-' || i || '.md', 'text/markdown', 10, md5(i::text), 'k/' || i,"
        " (ARRAY['READY', 'READY', 'READY', 'FAILED', 'PENDING'])[1 + i %% 5], now() - make_interval(secs => i)"
        " FROM generate_series(1, %(n)s) AS i", {"kb": kb, "n": n})
    await db.execute("ANALYZE documents")


async def _raw_listener(url: str):
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute("LISTEN ultimate_rag_documents")
    return conn


async def _notes(conn, timeout: float) -> list[str]:
    return [n.payload async for n in conn.notifies(timeout=timeout)]


async def test_documents_notify_only_while_a_hub_is_registered(container) -> None:
    """No registered hub: a document change sends nothing (a NOTIFY serialises every commit on the
    server); a hub subscribed: it does; the registration goes with the hub's last subscriber, and
    one that expired (its hub died) no longer counts."""
    from ultimate_rag.adapters.postgres.events import DocumentEventHub

    kb = await new_kb(container)
    raw = await _raw_listener(container.infra.db.url)
    try:
        await queue_document(container, kb)
        await container.infra.db.execute("INSERT INTO document_event_listeners VALUES (gen_random_uuid(), now() - interval '1 s')")
        await queue_document(container, kb)
        hub = DocumentEventHub(container.infra.db.url)
        async with hub.subscribe(kb) as sub:
            doc = await queue_document(container, kb)
            event = await asyncio.wait_for(sub.queue.get(), DEFAULT_TIMEOUT)
            assert event["id"] == str(doc)
        heard = [json.loads(p)["id"] for p in await _notes(raw, 0.5)]
        assert heard == [str(doc)]  # the two documents queued before the hub went unheard
        rows = await container.infra.db.fetchall("SELECT id FROM document_event_listeners WHERE expires_at > now()")
        assert rows == []
        await queue_document(container, kb)
        assert await _notes(raw, 0.5) == []
    finally:
        await raw.close()


async def test_a_subscription_is_ready_only_after_writers_that_missed_the_hub_committed(container) -> None:
    """A writer read "nobody listens" (its trigger ran) and has not committed when a hub starts:
    the subscription waits for that commit, so what a subscriber loads after it is ready holds the
    change it was not told about; every later change is told."""
    import psycopg

    from ultimate_rag.adapters.postgres.events import DocumentEventHub

    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    writer = await psycopg.AsyncConnection.connect(container.infra.db.url)
    hub = DocumentEventHub(container.infra.db.url)
    try:
        await writer.execute("UPDATE documents SET progress = '{\"n\": 1}' WHERE id = %s", (doc,))  # open
        subscription = hub.subscribe(kb)
        subscribing = asyncio.create_task(subscription.__aenter__())

        async def waiting_for_the_lock() -> int:
            row = await container.infra.db.fetchone(
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            return int(row["n"]) if row else 0

        await eventually(waiting_for_the_lock, lambda n: n == 1, what="the hub waiting for the writer")
        assert not subscribing.done()
        await writer.commit()
        sub = await asyncio.wait_for(subscribing, DEFAULT_TIMEOUT)
        row = await container.infra.db.fetchone("SELECT progress FROM documents WHERE id = %s", (doc,))
        assert row is not None and row["progress"] == {"n": 1}
        await container.infra.db.execute("UPDATE documents SET status = 'FAILED' WHERE id = %s", (doc,))
        event = await asyncio.wait_for(sub.queue.get(), DEFAULT_TIMEOUT)
        assert event == {"type": "document", "id": str(doc), "status": "FAILED", "op": "U"}
        await subscription.__aexit__(None, None, None)
    finally:
        await writer.close()
        await hub.close()

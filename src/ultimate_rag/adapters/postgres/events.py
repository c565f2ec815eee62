"""Document change events (migration 0003's trigger → ``pg_notify('ultimate_rag_documents', …)``),
received on ONE dedicated LISTEN connection per API process and fanned out to subscribers by
knowledge base. The connection is opened when the first subscriber arrives and closed when the
last one leaves. When it cannot be opened (a pooler in transaction mode, a lost server) subscribers
are told so and the page falls back to polling the document list.

The trigger notifies only while a hub is registered (migration 0018: a NOTIFY serialises commits
server-wide): the hub registers after its LISTEN, waits for the writers that may have missed the
registration to commit, and only then is a subscription ready; it refreshes the registration while
it listens (it expires ``REGISTRATION_SECONDS`` after the last refresh, so a hub that died stops
counting) and removes it when it stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg import sql

from ...domain.errors import EventsUnavailable
from .sql import load_queries

log = logging.getLogger(__name__)

CHANNEL = "ultimate_rag_documents"
Q = load_queries("events.sql")
QUEUE_SIZE = 1000  # events a slow subscriber may fall behind before it is told to resync
REGISTRATION_SECONDS = 60.0  # a registration not refreshed for this long no longer counts
REFRESH_SECONDS = 20.0
APPLICATION_NAME = "ultimate-rag document events"  # the hub's connection, as pg_stat_activity shows it


@dataclass(eq=False)
class Subscription:
    knowledge_base_id: UUID
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    overflowed: bool = False
    lost: bool = False  # the LISTEN connection went away: the subscriber should resync and reconnect

    def offer(self, event: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True


class DocumentEventHub:
    def __init__(self, url: str, *, connect_timeout: float = 5.0) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._subscribers: dict[UUID, set[Subscription]] = {}
        self._task: asyncio.Task[None] | None = None
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        self._registration = uuid4()  # this hub's row in document_event_listeners

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    @contextlib.asynccontextmanager
    async def subscribe(self, knowledge_base_id: UUID) -> AsyncIterator[Subscription]:
        sub = Subscription(knowledge_base_id)
        async with self._lock:
            if self._task is None or self._task.done():
                await self._start()
            self._subscribers.setdefault(knowledge_base_id, set()).add(sub)
        try:
            yield sub
        finally:
            async with self._lock:
                subs = self._subscribers.get(knowledge_base_id)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._subscribers[knowledge_base_id]
                if not self._subscribers:
                    await self._stop()

    async def _start(self) -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, application_name=APPLICATION_NAME,
                                                         connect_timeout=max(1, int(self._connect_timeout)))
            await conn.execute(sql.SQL(Q["listen"]).format(channel=sql.Identifier(CHANNEL)))
            await self._register(conn)
            await conn.execute(Q["writers_settled"])
        except (psycopg.Error, OSError) as exc:
            log.warning("document events unavailable, clients will poll: %s", exc)
            raise EventsUnavailable(str(exc)) from exc
        self._conn = conn
        self._task = asyncio.create_task(self._listen(conn), name="document-events")

    async def _stop(self) -> None:
        task, conn = self._task, self._conn
        self._task, self._conn = None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.execute(Q["unregister"], {"id": self._registration})
            with contextlib.suppress(Exception):
                await conn.close()

    async def _register(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(Q["register"], {"id": self._registration, "ttl": REGISTRATION_SECONDS})

    async def close(self) -> None:
        async with self._lock:
            await self._stop()

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            while True:
                async for note in conn.notifies(timeout=REFRESH_SECONDS):
                    self._dispatch(note.payload)
                await self._register(conn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # connection lost: every subscriber resyncs and reconnects
            log.warning("document events connection lost: %s", exc)
            for subs in list(self._subscribers.values()):
                for sub in subs:
                    sub.lost = True
                    sub.offer({"type": "lost"})

    def _dispatch(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            kb = UUID(data["kb"])
        except (ValueError, KeyError, TypeError):
            return
        event = {"type": "document", "id": data.get("id"), "status": data.get("status"), "op": data.get("op")}
        for sub in self._subscribers.get(kb, ()):
            sub.offer(event)

"""Document change events (migration 0003's trigger → ``pg_notify('ultimate_rag_documents', …)``),
received on ONE dedicated LISTEN connection per API process and fanned out to subscribers by
knowledge base. The connection is opened when the first subscriber arrives and closed when the
last one leaves. When it cannot be opened (a pooler in transaction mode, a lost server) subscribers
are told so and the page falls back to polling the document list."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from .sql import load_queries

log = logging.getLogger(__name__)

CHANNEL = "ultimate_rag_documents"
Q = load_queries("events.sql")
QUEUE_SIZE = 1000  # events a slow subscriber may fall behind before it is told to resync


class EventsUnavailable(Exception):
    """LISTEN is not possible right now: callers fall back to polling."""


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
            conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True,
                                                         connect_timeout=max(1, int(self._connect_timeout)))
            await conn.execute(sql.SQL(Q["listen"]).format(channel=sql.Identifier(CHANNEL)))
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
                await conn.close()

    async def close(self) -> None:
        async with self._lock:
            await self._stop()

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            async for note in conn.notifies():
                self._dispatch(note.payload)
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

"""Waiting for documents to settle, written once for both clients (a flow, see :mod:`._flows`):
follow the knowledge base's event stream (poll when the server has none), call back on every
change, and outlast a server that restarts or cannot be reached for a while (reconnect with
backoff) until the time limits say to give up:

* ``timeout``: the longest wait in all;
* ``idle_timeout``: the longest time in which no document changed (status, progress, error), so
  that a long run that keeps moving is never cut off, and one where nothing moves is."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import httpx

from ._core import Calls, Id, RetryPolicy, SseReader, pending_of, segment
from ._flows import CloseEvents, Flow, NextLine, OpenEvents, Sleep, pages, send
from .errors import ApiError, NotFound, ServerError, ServiceUnavailable, TransportError
from .models import Document

LIST_ABOVE = 20  # refresh more documents than this with the list endpoint
MAX_RECONNECT_DELAY = 5.0  # a waiting client finds a restarted server within seconds (one request each)
OnUpdate = Callable[[Document], None]
OnConnection = Callable[[str | None], None]  # why the server cannot be reached; None: reached again


def server_away(exc: BaseException) -> bool:
    """The server is restarting or cannot be reached (worth waiting for), as opposed to an answer
    that will not change (a 404, a revoked key)."""
    if isinstance(exc, TransportError | httpx.TransportError | ServiceUnavailable):
        return True
    return isinstance(exc, ServerError) and exc.status_code in (502, 504)  # a proxy whose upstream is away


@dataclass
class Watch:
    """The documents waited for, their latest state, and the clocks of the time limits."""

    ids: list[str]
    timeout: float
    idle_timeout: float | None
    on_update: OnUpdate | None
    on_connection: OnConnection | None
    docs: dict[str, Document] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    changed: float = field(default_factory=time.monotonic)
    away: str | None = None  # why the server cannot be reached now
    failures: int = 0

    def deadline(self) -> float:
        end = self.started + self.timeout
        return end if self.idle_timeout is None else min(end, self.changed + self.idle_timeout)

    def left(self) -> float:
        return max(0.0, self.deadline() - time.monotonic())

    def seen(self, doc: Document) -> None:
        before = self.docs.get(doc.id)
        self.docs[doc.id] = doc
        if before is None or _moved(before, doc):
            self.changed = time.monotonic()
            if self.on_update:
                self.on_update(doc)

    def lost(self, exc: BaseException) -> float:
        """The server cannot be reached: say so once; how long to wait before trying again."""
        self.failures += 1
        message = _why(exc)
        if self.away is None and self.on_connection:
            self.on_connection(message)
        self.away = message
        delay = min(MAX_RECONNECT_DELAY, 0.25 * 2.0 ** min(self.failures, 8)) * random.uniform(0.7, 1.0)
        return min(delay, self.left())

    def reached(self) -> None:
        if self.away is not None and self.on_connection:
            self.on_connection(None)
        self.away, self.failures = None, 0

    def timed_out(self) -> TimeoutError:
        pending = len(pending_of(self.docs, self.ids))
        if self.idle_timeout is not None and self.changed + self.idle_timeout <= self.started + self.timeout:
            why = f"nothing changed for {self.idle_timeout:g}s"
        else:
            why = f"after {self.timeout:g}s"
        if self.away:
            why += f" (the server cannot be reached: {self.away})"
        return TimeoutError(f"{pending} document(s) not ready: {why}")


def _moved(before: Document, after: Document) -> bool:
    return (before.status, before.progress, before.error_message, before.chunk_count) != \
        (after.status, after.progress, after.error_message, after.chunk_count)


def _why(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return f"{exc.detail} (HTTP {exc.status_code})"
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):  # raised by the event stream directly
        return f"cannot reach the server: {exc}"
    if isinstance(exc, httpx.TransportError):
        return f"the connection failed: {exc or type(exc).__name__}"
    return str(exc) or type(exc).__name__


def wait_until_ready(document_ids: Iterable[Id], retry: RetryPolicy, timeout: float, poll_interval: float,
                     on_update: OnUpdate | None, idle_timeout: float | None = None,
                     on_connection: OnConnection | None = None) -> Flow[list[Document]]:
    watch = Watch([str(i) for i in document_ids], timeout, idle_timeout, on_update, on_connection)
    for i in watch.ids:
        while i not in watch.docs:
            try:
                watch.seen((yield from send(Calls.get_document(i), retry)))
                watch.reached()
            except (ApiError, TransportError) as exc:
                if not server_away(exc):
                    raise
                yield from _pause(watch, exc)
    streaming = True
    while pending := pending_of(watch.docs, watch.ids):
        if time.monotonic() >= watch.deadline():
            raise watch.timed_out()
        kb = watch.docs[pending[0]].knowledge_base_id
        group = [i for i in pending if watch.docs[i].knowledge_base_id == kb]
        try:
            if streaming:
                streaming = yield from _follow(kb, group, watch, retry)
            else:  # no event stream on this server: poll
                yield Sleep(min(poll_interval, watch.left()))
                yield from _refresh(group, watch, retry)
            watch.reached()
        except (ApiError, TransportError, httpx.HTTPError) as exc:
            if server_away(exc):
                yield from _pause(watch, exc)
            elif streaming:
                streaming = False  # the stream is refused (an older server, too many streams): poll
            else:
                raise
    return [watch.docs[i] for i in watch.ids]


def _pause(watch: Watch, exc: BaseException) -> Flow[None]:
    """The server is away: wait a little longer each time, within the time limits."""
    delay = watch.lost(exc)
    if delay <= 0:
        raise watch.timed_out()
    yield Sleep(delay)


def _fresh(document_id: str, retry: RetryPolicy, previous: Document) -> Flow[Document]:
    try:
        return (yield from send(Calls.get_document(document_id), retry))
    except NotFound:
        return replace(previous, status="DELETED")  # removed for good while we waited


def _refresh(ids: list[str], watch: Watch, retry: RetryPolicy) -> Flow[None]:
    docs = watch.docs
    if len(ids) > LIST_ABOVE:  # one listing (pages of 500) rather than a request per document
        kb, wanted = docs[ids[0]].knowledge_base_id, set(ids)
        listed = yield from pages(lambda cursor: Calls.list_documents(kb, None, 500, cursor, None), retry)
        found = {d.id: d for d in listed if d.id in wanted}
        fresh = [found.get(i) or replace(docs[i], status="DELETED") for i in ids]
    else:
        fresh = []
        for i in ids:
            fresh.append((yield from _fresh(i, retry, docs[i])))
    for doc in fresh:
        watch.seen(doc)


def _follow(kb: str, group: list[str], watch: Watch, retry: RetryPolicy) -> Flow[bool]:
    """Read one event stream; False when the server says to poll instead."""
    seconds = max(1, int(min(25.0, watch.left() + 1)))
    try:
        yield OpenEvents(f"/api/knowledge-bases/{segment(kb)}/events", {"max_seconds": seconds})
        keep_streaming = yield from _read_events(set(group), watch, retry)
    except Exception:
        yield CloseEvents()
        raise
    yield CloseEvents()
    return keep_streaming


def _read_events(wanted: set[str], watch: Watch, retry: RetryPolicy) -> Flow[bool]:
    reader = SseReader()
    while (line := (yield NextLine())) is not None:
        event = reader.feed(line)
        if event is None:
            continue
        if event.event == "fallback":
            return False
        if event.event == "ready":  # subscribed: catch up on what changed before (or while the server was away)
            watch.reached()
            yield from _refresh(sorted(wanted), watch, retry)
        elif event.event == "document" and isinstance(event.data, dict) and event.data.get("id") in wanted:
            yield from _refresh([event.data["id"]], watch, retry)
        elif event.event in ("resync", "reconnect"):
            yield from _refresh(sorted(wanted), watch, retry)
            return True
        wanted = {i for i in wanted if not watch.docs[i].is_stable}
        if not wanted:
            return True
        if time.monotonic() >= watch.deadline():
            return True  # the caller gives up
    return True

"""Per-key limits on work one API process does at once, so that one key cannot take what every key
shares: the database pool (searches and answers hold a connection while they read) and the
long-lived streams (``/events``, GET ``/mcp``). A request beyond its key's share is answered 429
with ``Retry-After`` at once, never queued behind the flood it belongs to."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fastapi import HTTPException, Request

from ..settings import Settings

RETRY_AFTER_SECONDS = 1  # a slot frees when one of the key's own requests ends: usually within a second


class KeySlots:
    """Counts what is running, in all and per key. ``take`` answers 429 beyond either bound."""

    def __init__(self, total: int | None, per_key: int, what: str) -> None:
        self.total, self.per_key, self.what = total, per_key, what
        self.open: dict[str, int] = {}

    def take(self, key: str) -> Callable[[], None]:
        """A slot for ``key``; the returned function frees it (idempotent)."""
        if self.total is not None and sum(self.open.values()) >= self.total:
            raise busy(f"too many {self.what} are running on this server (at most {self.total}): try again later")
        if self.open.get(key, 0) >= self.per_key:
            raise busy(f"this key already has {self.per_key} {self.what} running (the most allowed at once): "
                       "wait for one to finish")
        self.open[key] = self.open.get(key, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.open[key] -= 1
                if not self.open[key]:
                    del self.open[key]
        return release

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        release = self.take(key)
        try:
            yield
        finally:
            release()


def busy(detail: str) -> HTTPException:
    return HTTPException(429, detail, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def stream_slots(state: object, settings: Settings) -> KeySlots:
    """The process's long-lived streams: ``/events`` and GET ``/mcp`` count together."""
    slots: KeySlots | None = getattr(state, "stream_slots", None)
    if slots is None:
        slots = KeySlots(settings.max_event_streams, settings.max_event_streams_per_key, "streams")
        state.stream_slots = slots  # type: ignore[attr-defined]  # Starlette's app.state takes any attribute
    return slots


def retrieval_slots(request: Request, settings: Settings) -> KeySlots:
    """Searches and answers (their retrieval) running at once, per key."""
    state = request.app.state
    slots: KeySlots | None = getattr(state, "retrieval_slots", None)
    if slots is None:
        slots = KeySlots(None, settings.max_searches_per_key, "searches")
        state.retrieval_slots = slots
    return slots

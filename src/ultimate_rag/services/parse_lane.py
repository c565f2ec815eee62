"""Long parses run in their own lane (issue: a scanned book must not starve the rest).

A worker runs ``concurrency`` jobs at once. A parse that runs longer than ``after_seconds`` (a
scanned book read page by page by OCR, a huge workbook) moves into the lane: while it is there it
no longer counts against ``concurrency``, so the worker claims another job in its place and small
documents keep flowing. The lane holds at most ``slots`` parses per worker; a long parse that finds
it full keeps its ordinary slot. A parse runs in a child process at a lower priority than the
worker (parsers/isolation.py), so what the lane adds competes for the CPU below the embedding model.
When the parse ends the job leaves the lane and counts again (the worker claims nothing new until it
is back under ``concurrency``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager


class LongParseLane:
    def __init__(self, after_seconds: float, slots: int) -> None:
        """``slots`` 0 (or ``after_seconds`` 0): no lane, every parse keeps its slot."""
        self.after_seconds = after_seconds
        self.slots = slots if after_seconds > 0 else 0
        self._inside: set[object] = set()
        self._listener: Callable[[], None] | None = None

    @property
    def size(self) -> int:
        """Jobs in the lane now: they do not count against the worker's concurrency."""
        return len(self._inside)

    def on_enter(self, listener: Callable[[], None]) -> None:
        """``listener`` (the worker's) is called when a parse moves into the lane: a slot freed up."""
        self._listener = listener

    @asynccontextmanager
    async def parsing(self) -> AsyncIterator[None]:
        """Around one parse: after ``after_seconds`` it moves into the lane if there is room."""
        if self.slots <= 0:
            yield
            return
        token = object()
        timer = asyncio.get_running_loop().call_later(self.after_seconds, self._enter, token)
        try:
            yield
        finally:
            timer.cancel()
            self._inside.discard(token)

    def _enter(self, token: object) -> None:
        if len(self._inside) >= self.slots:
            return
        self._inside.add(token)
        if self._listener is not None:
            self._listener()

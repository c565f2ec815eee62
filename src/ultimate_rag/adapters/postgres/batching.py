"""Group commit for small statements: concurrent calls share one round trip.

The first call runs at once, alone; calls that arrive while it is in flight wait and go together
in the next statement, and so on. Nothing waits for a timer, so a lone call costs what it did
before, and under load the statements per call fall by the number of callers in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupedCalls(Generic[T, R]):
    def __init__(self, run: Callable[[list[T]], Awaitable[list[R]]], *, max_batch: int = 256) -> None:
        """``run`` gets the items of one batch and returns one result per item, in order."""
        self._run = run
        self._max_batch = max_batch
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        if self._flusher is not None and self._flusher.get_loop() is not loop:
            self._pending, self._flusher = [], None  # left behind by a closed event loop
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="grouped-calls")
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:self._max_batch], self._pending[self._max_batch:]
            try:
                results = await self._run([item for item, _ in batch])
            except BaseException as exc:  # every caller of this batch gets the error (cancelled: too)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
                if not isinstance(exc, Exception):
                    self._fail_pending()
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():  # its caller may have been cancelled meanwhile
                    future.set_result(result)

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, []
        for _, future in pending:
            if not future.done():
                future.set_exception(asyncio.CancelledError())

"""A stream read under a deadline and a recurring check, even while its source is silent.

The source (a provider's token stream) runs in a task of its own and hands its items over a queue of
one, so waiting for the next item can time out without cutting the source off midway; when the
deadline passes or the check says no, the source task is cancelled (and the provider's request
with it). A slow drip therefore ends on time, and a revoked key is noticed within ``check_every``
seconds whether or not a token arrives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import TypeVar

T = TypeVar("T")
Check = Callable[[], Awaitable[bool]]


class StreamDeadline(Exception):
    """The stream ran longer than it may."""


class StreamRefused(Exception):
    """The recurring check said the stream may not go on (a revoked or expired key)."""


async def bounded(source: AsyncGenerator[T, None], *, seconds: float, check: Check | None = None,
                  check_every: float = 5.0) -> AsyncGenerator[T, None]:
    """``source``'s items until it ends; ``StreamDeadline`` after ``seconds``, ``StreamRefused`` when
    ``check()`` (run every ``check_every`` seconds) returns False. The source's own errors pass."""
    queue: asyncio.Queue[tuple[bool, T | BaseException | None]] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async with aclosing(source) as items:
                async for item in items:
                    await queue.put((True, item))
        except Exception as exc:
            await queue.put((False, exc))
            return
        await queue.put((False, None))

    loop = asyncio.get_running_loop()
    task = asyncio.create_task(pump())
    deadline = loop.time() + seconds
    next_check = loop.time() + check_every if check is not None else float("inf")
    try:
        while True:
            now = loop.time()
            if now >= deadline:
                raise StreamDeadline(f"longer than {seconds:g} s")
            if check is not None and now >= next_check:
                if not await check():
                    raise StreamRefused()
                next_check = loop.time() + check_every
            try:
                is_item, value = await asyncio.wait_for(queue.get(), timeout=min(deadline, next_check) - now)
            except TimeoutError:
                continue
            if is_item:
                yield value  # type: ignore[misc]  # an item of the source
            elif value is None:
                return
            else:
                raise value  # type: ignore[misc]  # the source's own error
    finally:
        task.cancel()
        await asyncio.wait([task])  # the source is closed (its request cancelled) before we go on

"""Waiting on a condition, the one way tests (and the contract suites) do it.

A test never sleeps for a fixed time hoping that something happened meanwhile: it asks again until
the condition holds, with a deadline generous enough for a loaded machine, and when the deadline
passes it fails with the last value it saw (or the last error the probe raised), so the failure
says what was really there. ``eventually`` is for async tests, ``eventually_sync`` for plain ones
(subprocesses, the browser); both take the same arguments.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

DEFAULT_TIMEOUT = 120.0  # seconds; generous on purpose (2 busy cores): a passing wait costs only its real time
_MAX_PAUSE = 0.5


def _truthy(value: Any) -> bool:
    return bool(value)


class _Attempts:
    """The shared bookkeeping: the deadline, the growing pause, the last outcome and the message."""

    def __init__(self, probe: Callable[[], Any], timeout: float, interval: float, what: str | None) -> None:
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.pause = interval
        self.what = what or getattr(probe, "__qualname__", repr(probe))
        self.last: Any = "(never asked)"

    def next_pause(self) -> float:
        """How long to wait before the next try; raises once the deadline has passed."""
        if time.monotonic() >= self.deadline:
            raise AssertionError(f"{self.what}: condition not met within {self.timeout:g}s; last value: {self.last!r}")
        pause, self.pause = self.pause, min(self.pause * 1.5, _MAX_PAUSE)
        return pause


# two signatures: an async probe's value is what it awaits to (one signature taking
# ``Awaitable[T] | T`` made mypy infer Never for every async probe)
@overload
async def eventually(probe: Callable[[], Awaitable[T]], until: Callable[[T], bool] = ...,
                     timeout: float = ..., *, interval: float = ..., what: str | None = ...,
                     ignoring: tuple[type[BaseException], ...] = ...) -> T: ...
@overload
async def eventually(probe: Callable[[], T], until: Callable[[T], bool] = ...,
                     timeout: float = ..., *, interval: float = ..., what: str | None = ...,
                     ignoring: tuple[type[BaseException], ...] = ...) -> T: ...
async def eventually(probe: Callable[[], Any], until: Callable[[Any], bool] = _truthy,
                     timeout: float = DEFAULT_TIMEOUT, *, interval: float = 0.02, what: str | None = None,
                     ignoring: tuple[type[BaseException], ...] = ()) -> Any:
    """Call ``probe`` (plain or async) until ``until(value)`` holds and return that value. Errors of
    the types in ``ignoring`` count as "not yet". Past ``timeout`` seconds: AssertionError naming
    ``what`` and the last value seen."""
    attempts = _Attempts(probe, timeout, interval, what)
    while True:
        try:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            if until(value):
                return value
            attempts.last = value
        except ignoring as exc:
            attempts.last = exc
        await asyncio.sleep(attempts.next_pause())


def eventually_sync(probe: Callable[[], T], until: Callable[[T], bool] = _truthy,
                    timeout: float = DEFAULT_TIMEOUT, *, interval: float = 0.02, what: str | None = None,
                    ignoring: tuple[type[BaseException], ...] = ()) -> T:
    """``eventually`` for code that is not async (it blocks the calling thread between tries)."""
    attempts = _Attempts(probe, timeout, interval, what)
    while True:
        try:
            value = probe()
            if until(value):
                return value
            attempts.last = value
        except ignoring as exc:
            attempts.last = exc
        time.sleep(attempts.next_pause())

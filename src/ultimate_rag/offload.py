"""CPU work of a job, by its size: on the event loop when it is small, in a thread when it is not.

A hop to a thread and back costs the process ~0.1 ms of CPU when nothing else runs (a wake-up of
the thread, a wake-up of the loop; measured with ``asyncio.to_thread`` under uvloop), which is
more than decoding, chunking or hashing a few kilobytes of text takes, and the interpreter lock
runs that Python code one thread at a time anyway. What a thread buys is a responsive event loop
(heartbeats, the other jobs' statements) while a large input is worked on, so inputs above
``SMALL_WORK`` characters (or bytes) still go to one: at that size the work takes a few
milliseconds at most, which the loop's other tasks can wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

SMALL_WORK = 32 * 1024  # characters or bytes of input
IN_A_THREAD = SMALL_WORK + 1  # the size of work that may block for long whatever its input (a model's first load)


async def run_sized(size: int, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, on the event loop when ``size`` is at most ``SMALL_WORK``, else in
    a thread (``asyncio.to_thread``: the caller's context goes with it)."""
    if size <= SMALL_WORK:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)

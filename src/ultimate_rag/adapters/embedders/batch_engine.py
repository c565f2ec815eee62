"""One embedding engine per embedder per process: every job's texts go through one queue into
one backend, in batches formed across jobs.

* Dynamic batching: a batch takes queued texts of one kind ("dense", "sparse") in arrival order;
  it closes when it holds ``batch_size`` texts or ``max_wait`` seconds after its first text was
  queued, whichever comes first (``max_wait`` 0: whatever is queued when a slot frees).
* At most ``max_in_flight`` batches are handed to the backend at once: for the local model 2,
  one running on its thread and the next waiting behind it in that thread's queue (the thread
  runs one at a time, so they never fight over the cores, and the model starts the next batch the
  moment one ends instead of after a trip through the event loop, which a busy worker delays);
  several for a remote server so that it always has work queued.
* Requests stream their results back batch by batch (per-job progress). A request whose caller
  is cancelled (the job's lease was lost) leaves the queue at once: its pending texts are never
  sent, and results of its texts already running are dropped on arrival.

The backend is ``run(kind, texts) -> results`` (a coroutine), the same for every kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
Backend = Callable[[str, list[str]], Awaitable[Sequence[Any]]]


@dataclass(eq=False)
class _Request:
    kind: str
    texts: Sequence[str]
    pending: int  # texts not yet answered
    results: asyncio.Queue[tuple[list[int], list[Any]] | BaseException] = field(default_factory=asyncio.Queue)
    cancelled: bool = False


@dataclass
class _Item:
    request: _Request
    index: int
    queued_at: float


class BatchEngine:
    def __init__(self, backend: Backend, *, batch_size: int = 1, max_wait: float = 0.0,
                 max_in_flight: int = 1, name: str = "embedder") -> None:
        self._backend = backend
        self.batch_size = max(1, int(batch_size))
        self.max_wait = max(0.0, float(max_wait))
        self.max_in_flight = max(1, int(max_in_flight))
        self.name = name
        self._queue: deque[_Item] = deque()
        self._in_flight = 0
        self._wake: asyncio.Event | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: set[asyncio.Task[None]] = set()
        self.busy_seconds = 0.0  # wall time with at least one batch running
        self._busy_since = 0.0
        self.batches = 0  # batches run, and how many of them mixed texts of several requests
        self.mixed_batches = 0

    # the caller's side ------------------------------------------------------------------------
    def queued(self) -> int:
        """Texts waiting for a batch (not counting those running)."""
        return len(self._queue)

    def busy(self) -> bool:
        """Someone else's texts are queued or running: a new request waits behind them."""
        return bool(self._queue) or self._in_flight > 0

    async def stream(self, kind: str, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[Any]]]:
        """Yield ``(indices into texts, results)`` as each batch holding some of them finishes.
        Cancelling the consumer (or closing the iterator early) withdraws the request."""
        if not texts:
            return
        request = _Request(kind, texts, len(texts))
        self._start()
        now = time.monotonic()
        self._queue.extend(_Item(request, i, now) for i in range(len(texts)))
        self._poke()
        try:
            while request.pending > 0:
                got = await request.results.get()
                if isinstance(got, BaseException):
                    raise got
                request.pending -= len(got[0])
                yield got
        finally:
            if request.pending > 0:
                self._withdraw(request)

    async def run(self, kind: str, texts: Sequence[str]) -> list[Any]:
        """All results of ``texts``, in order."""
        out: list[Any] = [None] * len(texts)
        async for indices, results in self.stream(kind, texts):
            for i, r in zip(indices, results, strict=True):
                out[i] = r
        return out

    async def aclose(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(BaseException):
                await self._dispatcher
            self._dispatcher = None
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    # the engine's side ------------------------------------------------------------------------
    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._dispatcher is None or self._loop is not loop or self._dispatcher.done():
            self._loop = loop  # a new event loop (tests run one per test): start afresh on it
            self._queue.clear()
            self._in_flight = 0
            self._running = set()
            self._wake = asyncio.Event()
            self._dispatcher = loop.create_task(self._dispatch(), name=f"embedding-engine-{self.name}")

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _withdraw(self, request: _Request) -> None:
        request.cancelled = True
        kept = [item for item in self._queue if item.request is not request]
        if len(kept) != len(self._queue):
            log.debug("embedding engine %s: withdrew %d queued texts of a cancelled request", self.name,
                      len(self._queue) - len(kept))
            self._queue = deque(kept)

    async def _dispatch(self) -> None:
        assert self._wake is not None
        while True:
            while not self._queue or self._in_flight >= self.max_in_flight:
                self._wake.clear()
                await self._wake.wait()
            if len(self._queue) < self.batch_size and self.max_wait > 0:
                # let the batch fill, up to max_wait after its first text was queued
                deadline = self._queue[0].queued_at + self.max_wait
                while self._queue and len(self._queue) < self.batch_size and time.monotonic() < deadline:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), deadline - time.monotonic())
                if not self._queue:
                    continue
            batch = self._take()
            if batch:
                self._launch(batch)

    def _take(self) -> list[_Item]:
        """The next batch: the oldest queued text's kind, in arrival order, up to batch_size."""
        kind = self._queue[0].request.kind
        batch: list[_Item] = []
        rest: deque[_Item] = deque()
        while self._queue and len(batch) < self.batch_size:
            item = self._queue.popleft()
            (batch if item.request.kind == kind else rest).append(item)
        rest.extend(self._queue)
        self._queue = rest
        return batch

    def _launch(self, batch: list[_Item]) -> None:
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        self.batches += 1
        if len({id(item.request) for item in batch}) > 1:
            self.mixed_batches += 1
        task = asyncio.get_running_loop().create_task(self._run_batch(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run_batch(self, batch: list[_Item]) -> None:
        kind = batch[0].request.kind
        try:
            answer = await self._backend(kind, [i.request.texts[i.index] for i in batch])
            if len(answer) != len(batch):
                raise RuntimeError(f"the embedder returned {len(answer)} results for {len(batch)} texts")
            results: Sequence[Any] | BaseException = answer
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # every request in the batch learns of it
            results = exc
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.busy_seconds += time.perf_counter() - self._busy_since
            self._poke()
        by_request: dict[int, tuple[_Request, list[int], list[Any]]] = {}
        for pos, item in enumerate(batch):
            entry = by_request.setdefault(id(item.request), (item.request, [], []))
            entry[1].append(item.index)
            if not isinstance(results, BaseException):
                entry[2].append(results[pos])
        for request, indices, values in by_request.values():
            if request.cancelled:
                continue  # its caller is gone: the result goes nowhere
            if isinstance(results, BaseException):
                request.cancelled = True  # the caller raises; its other texts need not run
                self._withdraw(request)
                request.results.put_nowait(results)
            else:
                request.results.put_nowait((indices, values))

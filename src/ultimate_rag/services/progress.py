"""What a running job says about its progress (``documents.progress``): pages parsed, chunks
embedded. Written through the pipeline store's fenced ``report_progress``, at most one write per
interval (the last one always), so a fast stage costs a few statements, not one per page or chunk."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..domain.models import Lease
from ..domain.ports import ProgressReports


class EmbeddingProgress:
    """Chunks embedded / total (and how many came from the cache) while EMBEDDING: a
    ``ProgressCallback``. At most one write per ``interval`` (the last one always, unless ``final``
    is off), except that a first wait for the embedder, before any chunk was embedded, is shown at
    once. ``final`` False: the last count (all done) is not written, as the caller's next stage
    entry follows at once and replaces it (it carries ``from_cache`` on, see ``processing``).
    ``shown``: the progress the stage's entry wrote already; a state equal to what is shown is
    never written again (the first count of a document with nothing cached is the entry's own)."""

    def __init__(self, store: ProgressReports, lease: Lease, interval: float, *, final: bool = True,
                 shown: dict[str, object] | None = None) -> None:
        self._store, self._lease, self._interval, self._final = store, lease, interval, final
        self._last = asyncio.get_running_loop().time() if shown is not None else 0.0  # the entry's write
        self._first_wait = True
        self._shown = shown
        self.from_cache = 0  # of the last report

    async def __call__(self, done: int, total: int, from_cache: int, waiting: bool = False) -> None:
        self.from_cache = from_cache
        now = asyncio.get_running_loop().time()
        show_wait = waiting and self._first_wait and done == from_cache
        if not show_wait and done >= total and not self._final:
            return
        if not show_wait and done < total and now - self._last < self._interval:
            return
        state = {"stage": "EMBEDDING", "done": done, "total": total, "from_cache": from_cache}
        state |= {"waiting": "embedder"} if waiting else {}
        if state == self._shown:
            return
        self._last, self._first_wait, self._shown = now, self._first_wait and not waiting, state
        await self._store.report_progress(self._lease, state)


def parse_progress(store: ProgressReports, lease: Lease, interval: float) -> Callable[[int, int], Awaitable[None]]:
    """Pages done / total while PARSING (OCR takes seconds a page), at most one write per interval,
    with ``eta_seconds``: the pages left at the pace of the pages done so far."""
    last = 0.0
    first: tuple[float, int] | None = None  # when the first report came, and its pages done

    async def report(done: int, total: int) -> None:
        nonlocal last, first
        now = asyncio.get_running_loop().time()
        first = first or (now, done)
        if done < total and now - last < interval:
            return
        last = now
        state: dict[str, object] = {"stage": "PARSING", "done": done, "total": total}
        if first[1] < done < total:
            state["eta_seconds"] = round((now - first[0]) / (done - first[1]) * (total - done))
        await store.report_progress(lease, state)

    return report

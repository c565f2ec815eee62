"""What a running job says about its progress (``documents.progress``): pages parsed, chunks
embedded. Written through the pipeline store's fenced ``report_progress``, at most one write per
interval (the last one always), so a fast stage costs a few statements, not one per page or chunk."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..domain.models import Lease
from ..domain.ports import PipelineStore
from .embedding import ProgressCallback


def embedding_progress(store: PipelineStore, lease: Lease, interval: float) -> ProgressCallback:
    """Chunks embedded / total (and how many came from the cache) while EMBEDDING."""
    last = 0.0
    first_wait = True

    async def report(done: int, total: int, from_cache: int, waiting: bool = False) -> None:
        """At most one write per ``interval`` (the last one always), except that a first wait for
        the embedder, before any chunk was embedded, is shown at once."""
        nonlocal last, first_wait
        now = asyncio.get_running_loop().time()
        show_wait = waiting and first_wait and done == from_cache
        if not show_wait and done < total and now - last < interval:
            return
        last, first_wait = now, first_wait and not waiting
        state = {"stage": "EMBEDDING", "done": done, "total": total, "from_cache": from_cache}
        await store.report_progress(lease, state | ({"waiting": "embedder"} if waiting else {}))

    return report


def parse_progress(store: PipelineStore, lease: Lease, interval: float) -> Callable[[int, int], Awaitable[None]]:
    """Pages done / total while PARSING (OCR takes seconds a page), at most one write per interval."""
    last = 0.0

    async def report(done: int, total: int) -> None:
        nonlocal last
        now = asyncio.get_running_loop().time()
        if done < total and now - last < interval:
            return
        last = now
        await store.report_progress(lease, {"stage": "PARSING", "done": done, "total": total})

    return report

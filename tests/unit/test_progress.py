"""What a running job writes as its embedding progress: throttled, a first wait shown at once, the
last count written unless the next stage's entry replaces it (then its cache count is kept)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from ultimate_rag.domain.models import Lease
from ultimate_rag.domain.status import JobOperation
from ultimate_rag.services.progress import EmbeddingProgress


class Recorder:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    async def report_progress(self, lease: Lease, progress: dict[str, Any]) -> None:
        self.written.append(progress)


LEASE = Lease(job_id=uuid4(), document_id=uuid4(), worker_id="w", attempt=1, max_attempts=3,
              operation=JobOperation.INGEST)


async def test_the_last_count_is_written_unless_the_next_stage_replaces_it() -> None:
    for final, expected in ((True, [0, 4, 8]), (False, [0, 4])):
        store = Recorder()
        report = EmbeddingProgress(store, LEASE, 0.0, final=final)
        for done in (0, 4, 8):
            await report(done, 8, 2)
        assert [w["done"] for w in store.written] == expected, final
        assert report.from_cache == 2


async def test_a_first_wait_is_shown_at_once_and_the_throttle_holds_the_rest() -> None:
    store = Recorder()
    report = EmbeddingProgress(store, LEASE, 3600.0, final=False)
    await report(3, 10, 3, waiting=True)  # all cached so far, the model busy with other jobs
    await report(5, 10, 3)  # within the interval: not written
    await report(10, 10, 3)  # done: the INDEXING entry follows
    assert store.written == [{"stage": "EMBEDDING", "done": 3, "total": 10, "from_cache": 3, "waiting": "embedder"}]


async def test_what_the_stage_entry_shows_already_is_not_written_again() -> None:
    entered = {"stage": "EMBEDDING", "done": 0, "total": 6, "from_cache": 0}
    store = Recorder()
    report = EmbeddingProgress(store, LEASE, 0.0, final=False, shown=dict(entered))
    await report(0, 6, 0)  # nothing cached: the entry says exactly this
    await report(0, 6, 0, waiting=True)  # the model busy with other jobs: news
    await report(3, 6, 0)
    await report(3, 6, 0)  # unchanged
    await report(6, 6, 0)  # done: the INDEXING entry follows
    assert store.written == [entered | {"waiting": "embedder"}, entered | {"done": 3}]
    store = Recorder()
    report = EmbeddingProgress(store, LEASE, 0.0, final=False, shown=dict(entered))
    await report(2, 6, 2)  # two came from the cache: that is news
    assert store.written == [{"stage": "EMBEDDING", "done": 2, "total": 6, "from_cache": 2}]

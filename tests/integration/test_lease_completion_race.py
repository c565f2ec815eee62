"""A job that has just committed READY is not a lost lease. Its job row ends SUCCEEDED with the
commit, so the next renewal finds nothing to renew; that renewal used to cancel the job's
post-commit cleanup (the previous revision's vectors and assets) and count a lease loss. Here the
race happens by construction: the cleanup waits until a renewal has been refused after the
commit, then runs; it must run to the end, the run counts as a success, nothing says "lost"."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any
from uuid import UUID

import httpx
import pytest

from ultimate_rag.domain.models import Lease
from ultimate_rag.services.job_loop import IngestionWorker, WorkerConfig

OLD = b"# Tides\n\nThe harbour master posts the spring tide table every Monday at the pier office.\n"
NEW = b"# Tides\n\nThe harbour master now posts the tide table on Sundays; the table code is WALRUS.\n"


async def rebuilt_document(client: httpx.AsyncClient, container) -> tuple[str, str]:
    kb = (await client.post("/api/knowledge-bases", json={"name": "tides"})).json()["id"]
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("tides.md", OLD, "text/markdown")})
    doc = r.json()["id"]
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    assert (await client.get(f"/api/documents/{doc}")).json()["status"] == "READY"
    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("tides.md", NEW, "text/markdown")})
    assert r.status_code == 202, r.text
    return kb, doc


def cleanup_after_a_refused_renewal(container, monkeypatch: pytest.MonkeyPatch,
                                    refused: asyncio.Event) -> list[str]:
    """The previous revision's removal starts only once a renewal was refused after the commit."""
    steps: list[str] = []
    for name in ("remove_superseded",):
        real = getattr(container.embedding.indexes, name)

        async def waiting(*args: Any, real: Callable[..., Any] = real, name: str = name) -> Any:
            steps.append(f"{name} waits")
            await refused.wait()  # (not wait_for: it may swallow a cancellation that arrives with the event)
            for _ in range(5):  # let whatever the refusal started run first
                await asyncio.sleep(0)
            result = await real(*args)
            steps.append(f"{name} done")
            return result

        monkeypatch.setattr(container.embedding.indexes, name, waiting)
    return steps


async def check_finished(client: httpx.AsyncClient, container, worker: IngestionWorker, doc: str, steps: list[str],
                         caplog: pytest.LogCaptureFixture) -> None:
    assert any(s.endswith("done") for s in steps), steps  # the cleanup ran to its end
    assert worker.processed == 1
    assert not worker.metrics.registry.get_sample_value("ultimate_rag_worker_lease_losses_total")
    assert not [r for r in caplog.records if "lease lost" in r.getMessage()]
    chunks = (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]
    assert await container.embedding.default_index.count_by_document(UUID(doc)) == len(chunks)  # the old revision's vectors went
    assert (await client.get(f"/api/documents/{doc}")).json()["status"] == "READY"


async def test_a_renewal_refused_by_the_ready_commit_lets_the_cleanup_finish_on_the_event_loop(
        client: httpx.AsyncClient, container, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    _, doc = await rebuilt_document(client, container)
    refused = asyncio.Event()
    renew = container.infra.queue.heartbeat

    async def heartbeat(lease: Lease) -> bool:
        alive = await renew(lease)
        if not alive:
            refused.set()
        return bool(alive)

    monkeypatch.setattr(container.infra.queue, "heartbeat", heartbeat)
    steps = cleanup_after_a_refused_renewal(container, monkeypatch, refused)
    worker = container.worker(WorkerConfig(heartbeat_seconds=0.05, lease_keeper=False))
    with caplog.at_level(logging.INFO):
        assert await worker.run_until_idle() == 1
    assert refused.is_set()
    await check_finished(client, container, worker, doc, steps, caplog)


async def test_a_renewal_refused_by_the_ready_commit_lets_the_cleanup_finish_with_the_lease_keeper(
        client: httpx.AsyncClient, container, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    _, doc = await rebuilt_document(client, container)
    refused = asyncio.Event()
    worker = container.worker(WorkerConfig(heartbeat_seconds=0.05))
    assert worker.keeper is not None
    keep = worker.keeper.keep

    def keep_and_tell(lease: Lease, on_lost: Callable[[], None]) -> Callable[[], None]:
        def lost() -> None:  # on the event loop, from the keeper's thread
            on_lost()
            refused.set()
        return keep(lease, lost)

    monkeypatch.setattr(worker.keeper, "keep", keep_and_tell)
    steps = cleanup_after_a_refused_renewal(container, monkeypatch, refused)
    with caplog.at_level(logging.INFO):
        assert await worker.run_until_idle() == 1
    assert refused.is_set()
    await check_finished(client, container, worker, doc, steps, caplog)

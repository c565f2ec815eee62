"""One worker, two jobs, the process's one embedding engine: the job whose lease is lost (an
operator fails it mid-embedding) stops there — its queued texts never reach the model and it
writes nothing — while the other job's texts keep flowing and it becomes READY."""

from __future__ import annotations

import asyncio
from uuid import UUID

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually

from .test_api import make_kb, upload
from .test_lifecycle import state


def long_text(word: str) -> str:
    return "\n\n".join(f"## {word} part {i}\n\n{word} ferry number {i} leaves the harbour at dawn with "
                       f"{i * 7} passengers and returns when the tide turns." for i in range(30))


async def test_a_lost_lease_withdraws_only_that_jobs_texts(client, container) -> None:
    engine = container.embedding.embedder.engine
    real = engine._backend
    sent: list[str] = []
    release = asyncio.Event()

    async def gated(kind: str, texts: list[str]):
        sent.extend(texts)
        await release.wait()  # the model is held busy until both jobs' texts are queued
        return await real(kind, texts)

    engine._backend = gated
    kb = await make_kb(client)
    lost = (await upload(client, kb, "alpha.md", long_text("Alpha").encode())).json()["id"]
    kept = (await upload(client, kb, "bravo.md", long_text("Bravo").encode())).json()["id"]
    worker = container.worker(WorkerConfig(concurrency=2, heartbeat_seconds=0.1, shutdown_grace_seconds=0))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))

    def queued_words() -> set[str]:
        texts = [item.request.texts[item.index] for item in engine._queue]
        return {word for word in ("Alpha", "Bravo") if any(word in t for t in texts)}

    async def both_queued() -> bool:
        return queued_words() == {"Alpha", "Bravo"}

    try:
        await eventually(both_queued, timeout=120, interval=0.05)
        r = await client.post(f"/api/documents/{lost}/fail")  # ends the job: its lease is gone
        assert r.status_code == 200, r.text

        async def only_kept_queued() -> bool:
            return queued_words() == {"Bravo"}

        await eventually(only_kept_queued, timeout=60, interval=0.05)  # the heartbeat noticed; withdrawn
        release.set()

        async def kept_ready() -> bool:
            return (await state(container, kept))["status"] == "READY"

        await eventually(kept_ready, timeout=300, interval=0.2)
    finally:
        release.set()
        stop.set()
        await running
    alpha_sent = [t for t in sent if "Alpha" in t]
    # at most the batches already handed to the model: one running, one queued behind it
    assert len(alpha_sent) <= engine.batch_size * engine.max_in_flight
    final = await state(container, lost)
    assert (final["status"], final["error_message"]) == ("FAILED", "cancelled by operator")
    assert await container.embedding.default_index.count_by_document(lost) == 0
    cache = container.embedding.service._cache  # what the lost job had in the model was not written anywhere
    # (which job's texts reach the model first is the chunking's race: Alpha's may never have been sent)
    assert await cache.get_many(UUID(kb), container.embedding.embedder.name, alpha_sent) == {}

"""Recovery details with a real PostgreSQL: no false alarms after a job ended, the audit log tells
the status an operation really started from, stuck means stuck, progress never looks frozen."""

from __future__ import annotations

import asyncio
import itertools
import logging
from contextlib import asynccontextmanager

from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually

from .helpers import new_kb, queue_document


async def test_no_lease_lost_warning_when_the_job_finished_during_the_heartbeat_sleep(
        container, caplog) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    worker = container.worker(WorkerConfig(heartbeat_seconds=0.3))
    [lease] = await container.infra.queue.claim(worker.worker_id)

    async def finish() -> None:  # the job succeeds while the heartbeat sleeps
        await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
        await container.ingest.pipeline.complete_already_ready(lease)

    work = asyncio.create_task(finish())
    lost = asyncio.Event()
    with caplog.at_level(logging.WARNING):
        await worker.runner.heartbeat(lease, work, lost)
    assert not lost.is_set()
    assert "lease lost" not in caplog.text
    assert (await container.ingest.documents.get(doc)).status == D.READY


async def test_the_audit_log_records_the_status_fail_started_from_under_the_lock(client, container) -> None:
    """The route reads the document (READY) before the operation locks it; a reindex commits in
    between (READY -> PENDING), so the fail starts from PENDING, and that is what is recorded."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
    await container.infra.db.execute("UPDATE ingestion_jobs SET status = 'SUCCEEDED' WHERE document_id = %s", (doc,))
    lifecycle, repo = container.ingest.lifecycle, container.ingest.lifecycle._repo

    @asynccontextmanager
    async def reindexed_meanwhile(document_id):
        del repo.locked  # once: the reindex, then the fail, lock as usual
        await lifecycle.reindex(document_id)
        async with repo.locked(document_id) as session:
            yield session

    repo.locked = reindexed_meanwhile
    r = await client.post(f"/api/documents/{doc}/fail")
    assert r.status_code == 200 and r.json()["status"] == "FAILED"
    entries = (await client.get("/api/audit")).json()["items"]
    [entry] = [e for e in entries if e["action"] == "document.fail"]
    assert entry["detail"]["previous_status"] == "PENDING"


async def _age(container, doc, seconds: float) -> None:
    await container.infra.db.execute(
        "UPDATE documents SET updated_at = now() - make_interval(secs => %s) WHERE id = %s", (seconds, doc))


async def _stuck(client) -> list[str]:
    r = await client.get("/api/documents/stuck", params={"older_than_seconds": 600})
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["items"]]


async def _stuck_gauge(client) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = (await client.get("/metrics")).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "ultimate_rag_documents_stuck")


async def test_a_healthy_backlog_is_not_stuck_but_a_silent_worker_and_an_idle_queue_are(
        client, container) -> None:
    container.settings.stuck_after_seconds = 600
    kb = await new_kb(container)
    running = await queue_document(container, kb, "being processed")
    [lease] = await container.infra.queue.claim("busy-worker")
    for stage in (D.PARSING, D.CHUNKING, D.EMBEDDING):
        await container.ingest.pipeline.enter_stage(lease, stage)
    backlog = [await queue_document(container, kb, f"queued {i}") for i in range(3)]
    for doc in [running, *backlog]:
        await _age(container, doc, 3600)  # an hour in their status, a big ingest
    await container.infra.queue.heartbeat(lease)
    assert await _stuck(client) == [] and await _stuck_gauge(client) == 0  # workers are busy on it

    # the worker stops heartbeating: its document is stuck, and nobody works on the backlog either
    await container.infra.db.execute("UPDATE ingestion_jobs SET locked_at = now() - interval '1 hour'"
                               " WHERE document_id = %s", (running,))
    assert sorted(await _stuck(client)) == sorted(str(d) for d in [running, *backlog])
    assert await _stuck_gauge(client) == 4

    # a retry waiting its backoff is not stuck either
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() + interval '1 hour'"
                               " WHERE document_id = ANY(%s)", (backlog,))
    assert await _stuck(client) == [str(running)]


LONG_TEXT = "\n\n".join(
    f"Section {i}. The storage cluster number {i} handled {i * 37} requests during the nightly load test, "
    f"and the operators wrote down what failed and what they would change next time around."
    for i in range(120)
)


async def test_progress_moves_in_small_steps_and_shows_waiting_for_the_embedder(container) -> None:
    """Two jobs in one worker share one local model: the one that waits says so, and progress is
    written every few chunks (here with no time throttle, to see the grain)."""
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"Document {n}. {LONG_TEXT}") for n in range(2)]
    reports: dict[object, list[dict]] = {d: [] for d in docs}
    real = container.ingest.pipeline.report_progress

    async def recording(lease, progress):
        reports[lease.document_id].append(dict(progress))
        await real(lease, progress)

    container.ingest.pipeline.report_progress = recording
    container.ingest.processor._progress_interval = 0.0
    worker = container.worker(WorkerConfig(concurrency=2, heartbeat_seconds=5))
    stop = asyncio.Event()
    run = asyncio.create_task(worker.run(stop))

    async def all_ready() -> bool:
        return [(await container.ingest.documents.get(d)).status for d in docs] == [D.READY] * len(docs)

    try:
        await eventually(all_ready, timeout=300)
    finally:
        stop.set()
        await run
    waits = [r for d in docs for r in reports[d] if r.get("waiting") == "embedder"]
    assert waits, reports
    for d in docs:
        done = [r["done"] for r in reports[d]]
        total = reports[d][-1]["total"]
        # the last count (all embedded) is not written: the INDEXING entry follows at once
        assert total > 16 and 0 < total - done[-1] <= 4, done
        steps = [b - a for a, b in itertools.pairwise(done) if b > a]
        assert max(steps) <= 4, done


async def test_storage_unavailable_answers_503_with_retry_after_and_stores_nothing(client, container) -> None:
    """The object storage refuses (an S3 outage reaches us as TransientError): 503, not 500."""
    from ultimate_rag.domain.errors import TransientError

    kb = await new_kb(container)

    class Unavailable:
        def __getattr__(self, name):
            return getattr(container.infra.storage, name)

        async def put(self, *args, **kwargs):
            raise TransientError("S3 could not store the object: SlowDown")

    container.ingest.ingestion._storage = Unavailable()
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("a.md", b"# A\n\ntext")})
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert "S3 could not store" in r.json()["detail"]
    row = await container.infra.db.fetchone("SELECT count(*) AS n FROM documents WHERE knowledge_base_id = %s", (kb,))
    assert row["n"] == 0

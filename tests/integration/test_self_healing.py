"""Recovery details with a real PostgreSQL: no false alarms after a job ended, the audit log tells
the status an operation really started from, stuck means stuck, progress never looks frozen."""

from __future__ import annotations

import asyncio
import logging

from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.worker import WorkerConfig

from .helpers import new_kb, queue_document


async def test_no_lease_lost_warning_when_the_job_finished_during_the_heartbeat_sleep(  # type: ignore[no-untyped-def]
        container, caplog) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    worker = container.worker(WorkerConfig(heartbeat_seconds=0.3))
    [lease] = await container.queue.claim(worker.worker_id)

    async def finish() -> None:  # the job succeeds while the heartbeat sleeps
        await container.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
        await container.queue.complete_already_ready(lease)

    work = asyncio.create_task(finish())
    lost = asyncio.Event()
    with caplog.at_level(logging.WARNING):
        await worker._heartbeat(lease, work, lost)
    assert not lost.is_set()
    assert "lease lost" not in caplog.text
    assert (await container.documents.get(doc)).status == D.READY


async def test_the_audit_log_records_the_status_fail_started_from_under_the_lock(client, container) -> None:  # type: ignore[no-untyped-def]
    """The route reads the document (READY) before the operation locks it; a reindex commits in
    between (READY -> PENDING), so the fail starts from PENDING, and that is what is recorded."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    await container.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
    await container.db.execute("UPDATE ingestion_jobs SET status = 'SUCCEEDED' WHERE document_id = %s", (doc,))
    repo = container.lifecycle._repo
    original = repo.fail

    async def reindexed_meanwhile(document_id, **kwargs):  # type: ignore[no-untyped-def]
        await repo.reindex(document_id)
        return await original(document_id, **kwargs)

    repo.fail = reindexed_meanwhile
    r = await client.post(f"/api/documents/{doc}/fail")
    assert r.status_code == 200 and r.json()["status"] == "FAILED"
    entries = (await client.get("/api/audit")).json()["items"]
    [entry] = [e for e in entries if e["action"] == "document.fail"]
    assert entry["detail"]["previous_status"] == "PENDING"

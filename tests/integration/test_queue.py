"""The PostgreSQL queue against a real server: claim, reclaim, convergence, backoff, fencing."""

from __future__ import annotations

import asyncio

import pytest

from ultimate_rag.domain.errors import LeaseLostError
from ultimate_rag.domain.models import ReadyCommit
from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.testing.eventually import eventually

from .helpers import expire_lease, job_row, new_kb, queue_document


async def test_concurrent_claimers_never_share_a_job(container) -> None:
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"text {i}") for i in range(60)]
    seen: list[tuple[str, object]] = []

    async def claimer(n: int) -> None:
        while True:
            leases = await container.infra.queue.claim(f"w{n}", limit=3)
            if not leases:
                return
            seen.extend((f"w{n}", lease.job_id) for lease in leases)

    await asyncio.gather(*(claimer(n) for n in range(8)))
    job_ids = [job for _, job in seen]
    assert len(job_ids) == len(set(job_ids)) == len(docs)
    rows = await container.infra.db.fetchall("SELECT status, attempts, locked_by FROM ingestion_jobs")
    assert all(r["status"] == "RUNNING" and r["attempts"] == 1 and r["locked_by"] for r in rows)


async def test_claim_counts_attempts_and_skips_jobs_not_yet_due(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET available_at = now() + interval '1 hour' WHERE document_id = %s", (doc,)
    )
    assert await container.infra.queue.claim("w", 5) == []
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (doc,))
    [lease] = await container.infra.queue.claim("w", 5)
    assert lease.attempt == 1 and lease.document_id == doc


async def test_expired_lease_is_reclaimed_and_the_document_restarts(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    [a] = await container.infra.queue.claim("worker-a")
    await container.ingest.pipeline.enter_stage(a, D.PARSING)
    await container.ingest.pipeline.enter_stage(a, D.CHUNKING)
    assert await container.infra.queue.claim("worker-b") == []  # the lease is alive
    await expire_lease(container, doc)
    container.infra.queue.retry_delay_seconds = 0
    assert await container.infra.queue.claim("worker-b") == []  # converged: back to PENDING, due at once
    assert (await container.ingest.documents.get(doc)).status == D.PENDING
    [b] = await container.infra.queue.claim("worker-b")
    assert (b.job_id, b.attempt) == (a.job_id, 2)
    await container.ingest.pipeline.enter_stage(b, D.PARSING)


async def test_fencing_refuses_every_write_of_a_worker_that_lost_its_job(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    [a] = await container.infra.queue.claim("worker-a")
    await container.ingest.pipeline.enter_stage(a, D.PARSING)
    await expire_lease(container, doc)
    container.infra.queue.retry_delay_seconds = 0
    assert await container.infra.queue.claim("worker-b") == []  # converges the lost attempt
    [b] = await container.infra.queue.claim("worker-b")
    await container.ingest.pipeline.enter_stage(b, D.PARSING)
    before = await job_row(container, doc)

    assert await container.infra.queue.heartbeat(a) is False
    with pytest.raises(LeaseLostError):
        await container.ingest.pipeline.enter_stage(a, D.CHUNKING)
    with pytest.raises(LeaseLostError):
        await container.ingest.pipeline.report_progress(a, {"done": 1})
    with pytest.raises(LeaseLostError):
        await container.ingest.pipeline.commit_ready(a, ReadyCommit(chunks=(), revision=1),
                                              write_vectors=_fail_if_called,
                                              finish=lambda _: _fail_if_called())
    with pytest.raises(LeaseLostError):
        await container.infra.queue.fail(a, error="x", will_retry=False, delay_seconds=0, document_message="x",
                                   cleanup=_fail_if_called)
    with pytest.raises(LeaseLostError):
        await container.infra.queue.release(a)

    after = await job_row(container, doc)
    assert after == before
    document = await container.ingest.documents.get(doc)
    assert document.status == D.PARSING and document.error_message is None
    assert await container.infra.queue.heartbeat(b) is True


async def _fail_if_called() -> None:
    raise AssertionError("a fenced-out worker ran a side effect")


async def test_a_lost_attempt_is_given_back_and_waits_a_backoff(container) -> None:
    """A crash is not the document's fault: the lost attempt does not count against max_attempts,
    is in the error history with the worker that lost it, and the job waits like a retry."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, max_attempts=1)
    container.infra.queue.retry_delay_seconds = 60
    [a] = await container.infra.queue.claim("worker-a")
    await container.ingest.pipeline.enter_stage(a, D.PARSING)
    await expire_lease(container, doc)
    assert await container.infra.queue.claim("worker-b") == []  # converged, but not due yet
    job = await job_row(container, doc)
    assert (job["status"], job["attempts"], job["max_attempts"], job["locked_by"]) == ("PENDING", 1, 2, None)
    assert job["lost_streak"] == 1 and job["lost_workers"] == ["worker-a"]
    [entry] = job["error_history"]
    assert entry["worker"] == "worker-a" and entry["lost_lease"] is True and entry["attempt"] == 1
    assert "worker worker-a stopped" in entry["error"] and 50 <= entry["retry_in_seconds"] <= 70
    delay = await container.infra.db.fetchone(
        "SELECT extract(epoch FROM available_at - now()) AS s FROM ingestion_jobs WHERE document_id = %s", (doc,))
    assert 40 < float(delay["s"]) <= 70
    document = await container.ingest.documents.get(doc)
    assert document.status == D.PENDING and "does not count as a failed attempt" in (document.error_message or "")

    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (doc,))
    [b] = await container.infra.queue.claim("worker-b")
    assert (b.attempt, b.max_attempts) == (2, 2)
    await container.ingest.pipeline.enter_stage(b, D.PARSING)


async def test_every_lost_attempt_is_recorded_and_a_normal_end_resets_the_streak(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    container.infra.queue.retry_delay_seconds = 3600
    container.infra.queue.poison_after = 99
    for n in range(4):
        await _lose(container, doc, f"worker-{n}")
    job = await job_row(container, doc)
    assert [e["worker"] for e in job["error_history"]] == [f"worker-{n}" for n in range(4)]
    assert [e["attempt"] for e in job["error_history"]] == [1, 2, 3, 4]
    assert job["lost_streak"] == 4 and job["status"] == "PENDING"
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (doc,))
    [lease] = await container.infra.queue.claim("worker-ok")
    await container.infra.queue.fail(lease, error="boom", will_retry=True, delay_seconds=0, document_message="retry")
    job = await job_row(container, doc)
    assert (job["lost_streak"], job["lost_workers"], job["lost_since"]) == (0, [], None)


async def _lose(container, doc, worker: str) -> None:
    """``worker`` claims the job and dies with it; a claim after the lease expired converges it."""
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (doc,))
    [lease] = await container.infra.queue.claim(worker, 1)  # first in queue order: it keeps its place
    assert lease.document_id == doc
    await expire_lease(container, doc)
    assert [lease for lease in await container.infra.queue.claim("converger", 1) if lease.document_id == doc] == []


async def lose_twice_while_another_succeeds(container, kb, poison) -> None:
    """Two lost attempts of ``poison`` on two workers, then another document's job succeeds on a
    third: the streak a third lost attempt turns into a poison verdict."""
    healthy = await queue_document(container, kb, "healthy")
    await _not_due(container, healthy)
    await _lose(container, poison, "worker-a")
    await _lose(container, poison, "worker-b")
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (healthy,))
    [ok] = await container.infra.queue.claim("worker-c")
    assert ok.document_id == healthy
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (healthy,))
    await container.ingest.pipeline.complete_already_ready(ok)  # another job succeeded meanwhile


async def _not_due(container, doc) -> None:
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET available_at = now() + interval '1 hour' WHERE document_id = %s", (doc,))


async def test_a_file_that_keeps_killing_workers_fails_as_poison(container) -> None:
    """Three lost attempts in a row, on different workers, while another job succeeded: FAILED."""
    kb = await new_kb(container)
    container.infra.queue.retry_delay_seconds = 3600  # converged jobs stay out of the way of the next claim
    poison = await queue_document(container, kb, "poison")
    await lose_twice_while_another_succeeds(container, kb, poison)
    await _lose(container, poison, "worker-c")
    job = await job_row(container, poison)
    assert job["status"] == "FAILED" and job["attempts"] == 3
    assert [e["worker"] for e in job["error_history"]] == ["worker-a", "worker-b", "worker-c"]
    document = await container.ingest.documents.get(poison)
    assert document.status == D.FAILED
    assert "stopped the worker processing it 3 times in a row (on 3 different workers)" in document.error_message


async def test_a_crash_loop_that_kills_other_workers_too_fails_nobody(container) -> None:
    """Same streak as a poison file, but another worker, which never held this file, also died
    meanwhile: workers are being killed whatever they hold, so the file is not blamed."""
    kb = await new_kb(container)
    container.infra.queue.retry_delay_seconds = 3600
    doc = await queue_document(container, kb, "unlucky")
    bystander = await queue_document(container, kb, "bystander")
    healthy = await queue_document(container, kb, "healthy")
    await _not_due(container, bystander)
    await _not_due(container, healthy)
    await _lose(container, doc, "worker-a")
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() - interval '1 second'"
                               " WHERE document_id = %s", (bystander,))
    await _lose(container, bystander, "worker-z")  # killed while holding something else
    await _lose(container, doc, "worker-b")
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (healthy,))
    [ok] = await container.infra.queue.claim("worker-c")
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (healthy,))
    await container.ingest.pipeline.complete_already_ready(ok)
    await _lose(container, doc, "worker-c")
    job = await job_row(container, doc)
    assert (job["status"], job["lost_streak"]) == ("PENDING", 3)
    assert (await container.ingest.documents.get(doc)).status == D.PENDING


async def test_lost_attempts_without_any_success_meanwhile_never_fail(container) -> None:
    """Every worker crashing (nothing succeeds): the document is unlucky, not poison; it waits."""
    kb = await new_kb(container)
    container.infra.queue.retry_delay_seconds = 3600
    doc = await queue_document(container, kb)
    for worker in ("worker-a", "worker-b", "worker-c", "worker-d"):
        await _lose(container, doc, worker)
    job = await job_row(container, doc)
    assert (job["status"], job["lost_streak"], job["max_attempts"]) == ("PENDING", 4, 3 + 4)
    assert (await container.ingest.documents.get(doc)).status == D.PENDING


async def test_lost_attempts_on_one_worker_only_never_fail(container) -> None:
    kb = await new_kb(container)
    container.infra.queue.retry_delay_seconds = 3600
    other = await queue_document(container, kb, "other")
    [ok] = await container.infra.queue.claim("worker-x")
    doc = await queue_document(container, kb)
    for _ in range(4):
        await _lose(container, doc, "worker-a")
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (other,))
    await container.ingest.pipeline.complete_already_ready(ok)
    await _lose(container, doc, "worker-a")
    assert (await job_row(container, doc))["status"] == "PENDING"


async def test_a_retry_keeps_its_place_in_the_queue(container) -> None:
    """A transient failure's retry is claimed before documents uploaded after it, once due."""
    kb = await new_kb(container)
    first = await queue_document(container, kb, "first")
    [a] = await container.infra.queue.claim("w")
    await container.infra.queue.fail(a, error="boom", will_retry=True, delay_seconds=0, document_message="retry")
    backlog = [await queue_document(container, kb, f"later {i}") for i in range(5)]
    [again] = await container.infra.queue.claim("w")
    assert again.document_id == first and again.attempt == 2
    [nxt] = await container.infra.queue.claim("w")
    assert nxt.document_id == backlog[0]


async def test_exhausted_expired_lease_of_a_ready_document_succeeds(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, max_attempts=1)
    await container.infra.queue.claim("worker-a")
    # the worker crashed in the window between READY and completing the job
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
    await expire_lease(container, doc)
    assert await container.infra.queue.claim("worker-b") == []
    assert (await job_row(container, doc))["status"] == "SUCCEEDED"
    assert (await container.ingest.documents.get(doc)).status == D.READY


async def test_transient_failure_schedules_a_retry_with_backoff(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    [a] = await container.infra.queue.claim("w")
    await container.ingest.pipeline.enter_stage(a, D.PARSING)
    await container.infra.queue.fail(a, error="boom", will_retry=True, delay_seconds=120,
                               document_message="attempt 1/3 failed temporarily, retrying automatically: boom")
    job = await job_row(container, doc)
    assert job["status"] == "PENDING" and job["attempts"] == 1 and job["locked_by"] is None
    delay = await container.infra.db.fetchone(
        "SELECT extract(epoch FROM available_at - now()) AS s FROM ingestion_jobs WHERE document_id = %s", (doc,)
    )
    assert 100 < float(delay["s"]) <= 120
    assert job["error_history"] == [{"attempt": 1, "at": job["error_history"][0]["at"], "error": "boom",
                                     "retry_in_seconds": 120.0}]
    document = await container.ingest.documents.get(doc)
    assert document.status == D.PENDING and "retrying automatically" in (document.error_message or "")
    assert await container.infra.queue.claim("w") == []  # not due yet


async def test_graceful_release_does_not_burn_an_attempt(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    [a] = await container.infra.queue.claim("w")
    await container.ingest.pipeline.enter_stage(a, D.PARSING)
    await container.infra.queue.release(a)
    job = await job_row(container, doc)
    assert (job["status"], job["attempts"], job["locked_by"]) == ("PENDING", 0, None)
    assert (await container.ingest.documents.get(doc)).status == D.PENDING
    [again] = await container.infra.queue.claim("w2")
    assert again.attempt == 1


async def test_document_and_job_status_change_together(container) -> None:
    """A reader never sees them disagree: sample both in one snapshot while a worker moves them."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    [a] = await container.infra.queue.claim("w")
    for stage in (D.PARSING, D.CHUNKING, D.EMBEDDING):
        await container.ingest.pipeline.enter_stage(a, stage)
        row = await container.infra.db.fetchone(
            "SELECT d.status AS d, j.status AS j FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id"
            " WHERE d.id = %s", (doc,))
        assert (row["d"], row["j"]) == (stage.value, "RUNNING")
    await container.infra.queue.fail(a, error="bad", will_retry=False, delay_seconds=0, document_message="bad")
    row = await container.infra.db.fetchone(
        "SELECT d.status AS d, j.status AS j FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id"
        " WHERE d.id = %s", (doc,))
    assert (row["d"], row["j"]) == ("FAILED", "FAILED")


async def test_claim_uses_the_partial_indexes_with_many_finished_jobs(container) -> None:
    kb = await new_kb(container)
    await container.infra.db.execute(
        "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key, status)"
        " SELECT gen_random_uuid(), %s, 'f', 'text/plain', 1, 'x', 'k', 'READY' FROM generate_series(1, 20000)",
        (kb,),
    )
    await container.infra.db.execute(
        "INSERT INTO ingestion_jobs (id, document_id, status, attempts, max_attempts)"
        " SELECT gen_random_uuid(), id, 'SUCCEEDED', 1, 3 FROM documents"
    )
    await container.infra.db.execute("ANALYZE ingestion_jobs")
    await container.infra.db.execute("ANALYZE documents")
    from ultimate_rag.adapters.postgres.queue import Q

    async with container.infra.db.connection() as conn:
        plan = await (await conn.execute("EXPLAIN " + Q["claim"], container.infra.queue.claim_params("w", 4))).fetchall()
    text = "\n".join(r["QUERY PLAN"] for r in plan)
    assert "ingestion_jobs_pending_idx" in text and "ingestion_jobs_running_idx" in text, text
    assert "Seq Scan on ingestion_jobs" not in text, text
    # expired re-upload leases are found through a partial index, never by reading every document
    assert "Seq Scan on documents" not in text, text


async def test_an_idle_worker_is_woken_by_notify_not_by_its_poll(container) -> None:
    """With an hour-long poll interval, only LISTEN/NOTIFY can explain a job claimed within the
    test's deadline."""
    from ultimate_rag.adapters.postgres.documents import NOTIFY_CHANNEL
    from ultimate_rag.services.job_loop import WorkerConfig

    kb = await new_kb(container)
    worker = container.worker(WorkerConfig(poll_interval_seconds=3600, heartbeat_seconds=5))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        # the worker found nothing and listens now
        await eventually(lambda: container.infra.queue._listener is not None, what="the worker listens")
        doc = await queue_document(container, kb, "wake up")  # its commit notifies

        async def status() -> D:
            # a notification sent before the listener waits again is announced once more
            await container.infra.db.execute("SELECT pg_notify(%s, '')", (NOTIFY_CHANNEL,))
            return (await container.ingest.documents.get(doc)).status

        await eventually(status, lambda s: s == D.READY, what="the worker was woken")
    finally:
        stop.set()
        await running


async def test_a_suspect_runs_alone_in_an_idle_worker(container) -> None:
    """Two jobs lost together (one killed the worker, the other only shared it): each next runs
    alone, so the next death is the guilty one's. Busy workers take nothing while a suspect is due."""
    kb = await new_kb(container)
    container.infra.queue.retry_delay_seconds = 0
    a = await queue_document(container, kb, "a")
    b = await queue_document(container, kb, "b")
    other = await queue_document(container, kb, "other")
    await _not_due(container, other)
    leases = await container.infra.queue.claim("worker-1", 2)
    assert {lease.document_id for lease in leases} == {a, b} and not any(lease.suspect for lease in leases)
    for doc in (a, b):
        await expire_lease(container, doc)
    assert await container.infra.queue.claim("converger", 2) == []  # converged: both are suspects now
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (other,))
    assert await container.infra.queue.claim("busy-worker", 1, idle=False) == []  # drains first
    [first] = await container.infra.queue.claim("worker-2", 2)
    assert first.document_id == a and first.suspect
    [second] = await container.infra.queue.claim("worker-3", 2)
    assert second.document_id == b and second.suspect
    [normal] = await container.infra.queue.claim("busy-worker", 1, idle=False)
    assert normal.document_id == other and not normal.suspect

"""Workers are killed, paused past their lease and stopped mid-stage: nothing is lost, duplicated,
stuck or half-visible, and a worker that lost its job commits nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from ultimate_rag.testing.eventually import eventually

from ..integration.helpers import new_kb, queue_document

pytestmark = pytest.mark.acceptance

def sections(n: int) -> str:
    return "\n\n".join(
        f"Section {i}. The storage cluster number {i} handled {i * 37} requests during the nightly load test, "
        f"and the operators wrote down what failed and what they would change next time around."
        for i in range(n)
    )


# ~35 chunks of ~225 tokens: long enough to catch a worker in EMBEDDING, short enough for a test
LONG_TEXT = sections(200)
# ~105 chunks for the pause: a pause that lands after the embedding (on a fast machine the rest of
# a short document embeds between two polls) would test nothing
LONGER_TEXT = sections(600)


async def doc_state(container, doc_id):
    return await container.infra.db.fetchone(
        "SELECT d.status, d.error_message, d.chunk_count, d.updated_at, d.progress, j.status AS job_status,"
        " j.attempts, j.locked_by, j.updated_at AS job_updated_at FROM documents d"
        " JOIN ingestion_jobs j ON j.document_id = d.id WHERE d.id = %s", (doc_id,))


async def embedding_started(container, doc_id):
    row = await doc_state(container, doc_id)
    return row["status"] == "EMBEDDING" and (row["progress"] or {}).get("done", 0) >= 2


async def assert_consistent_ready(container, settings, kb, doc_id) -> list:
    row = await doc_state(container, doc_id)
    assert row["status"] == "READY" and row["job_status"] == "SUCCEEDED", row
    assert row["error_message"] is None
    chunks = await container.infra.db.fetchall("SELECT id FROM chunks WHERE document_id = %s", (doc_id,))
    vectors = await container.infra.db.fetchall("SELECT chunk_id FROM chunk_vectors_384 WHERE document_id = %s", (doc_id,))
    snapshot = json.loads((settings.snapshots_dir / str(kb) / str(doc_id) / "chunks.json").read_text())
    chunk_ids = sorted(str(r["id"]) for r in chunks)
    assert len(chunk_ids) == len(set(chunk_ids)) == row["chunk_count"] > 5
    assert sorted(str(r["chunk_id"]) for r in vectors) == chunk_ids
    assert sorted(c["id"] for c in snapshot["chunks"]) == chunk_ids
    return chunk_ids


async def test_sigkill_mid_embedding_recovers_through_lease_expiry(container, settings, workers) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, LONG_TEXT)
    first = workers.start()
    await eventually(lambda: embedding_started(container, doc))
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    stuck = await doc_state(container, doc)
    assert stuck["status"] == "EMBEDDING" and stuck["job_status"] == "RUNNING"  # the last stage that began

    workers.start()
    await eventually(lambda: _is(container, doc, "READY"), timeout=600)  # recovery, not speed: generous on a loaded machine
    await assert_consistent_ready(container, settings, kb, doc)
    row = await doc_state(container, doc)
    assert row["attempts"] == 2


async def test_worker_paused_past_its_lease_commits_nothing_when_it_resumes(container, settings, workers) -> None:
    """Paused anywhere, inside a transaction too (its rows locked): the server ends a worker's
    transaction idle past its limit, so the second worker can take the job over."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, LONGER_TEXT)
    paused = workers.start()
    await eventually(lambda: embedding_started(container, doc))
    os.kill(paused.pid, signal.SIGSTOP)
    assert (await doc_state(container, doc))["status"] == "EMBEDDING"

    second = workers.start()
    await eventually(lambda: _is(container, doc, "READY"), timeout=600)  # recovery, not speed: generous on a loaded machine
    chunk_ids = await assert_consistent_ready(container, settings, kb, doc)
    before = await doc_state(container, doc)
    assert before["locked_by"] is None and before["attempts"] == 2
    os.kill(second.pid, signal.SIGTERM)  # only the resumed worker remains
    second.wait(timeout=30)

    os.kill(paused.pid, signal.SIGCONT)
    await eventually(lambda: _logged(workers, paused, "lease lost"), timeout=30)
    await asyncio.sleep(2)  # the scenario: a window in which a late write of the resumed worker would land
    after = await doc_state(container, doc)
    assert after == before
    assert await assert_consistent_ready(container, settings, kb, doc) == chunk_ids
    os.kill(paused.pid, signal.SIGTERM)
    assert paused.wait(timeout=30) == 0


async def test_sigterm_hands_in_flight_jobs_back_without_burning_an_attempt(container, settings, workers) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, LONG_TEXT)
    first = workers.start()
    await eventually(lambda: embedding_started(container, doc))
    os.kill(first.pid, signal.SIGTERM)
    assert first.wait(timeout=30) == 0
    row = await doc_state(container, doc)
    assert (row["status"], row["job_status"], row["attempts"], row["locked_by"]) == ("PENDING", "PENDING", 0, None)
    assert "handed back" in workers.log_of(first)

    workers.start()
    await eventually(lambda: _is(container, doc, "READY"), timeout=600)  # recovery, not speed: generous on a loaded machine
    await assert_consistent_ready(container, settings, kb, doc)
    assert (await doc_state(container, doc))["attempts"] == 1


async def test_many_documents_through_two_workers_one_killed(container, settings, workers) -> None:
    """Twelve documents, two workers, one SIGKILLed while busy: every document ends READY once."""
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"Document {i}. " + LONG_TEXT[: 600 + 40 * i]) for i in range(12)]
    a = workers.start()
    workers.start()

    async def some_running():
        row = await container.infra.db.fetchone(
            "SELECT count(*) AS n FROM ingestion_jobs WHERE status = 'RUNNING' AND locked_by LIKE %s",
            (f"%:{a.pid}:%",))
        return row["n"] > 0

    await eventually(some_running)
    os.kill(a.pid, signal.SIGKILL)
    workers.start()

    async def all_ready():
        row = await container.infra.db.fetchone(
            "SELECT count(*) FILTER (WHERE status = 'READY') AS ready, count(*) AS n FROM documents")
        return row["ready"] == row["n"]

    await eventually(all_ready, timeout=600)
    for doc in docs:
        row = await doc_state(container, doc)
        assert row["job_status"] == "SUCCEEDED"
        n_chunks = (await container.infra.db.fetchone(
            "SELECT count(*) AS n FROM chunks WHERE document_id = %s", (doc,)))["n"]
        n_vectors = await container.embedding.default_index.count_by_document(doc)
        assert n_chunks == n_vectors == row["chunk_count"] > 0


async def _is(container, doc, status):
    row = await doc_state(container, doc)
    assert row["status"] != "FAILED", row
    return row["status"] == status


async def _logged(workers, proc, text):
    return text in workers.log_of(proc)

"""The set-based status writes against a real server: each takes the statuses it may move a document
or a job from as parameters (the transition tables' sources), and PostgreSQL holds to them. The
states built here are ones the service never produces; they show the gate itself at work."""

from __future__ import annotations

from uuid import UUID

from ultimate_rag.adapters.postgres.lifecycle import queue_batch_params, queue_in_batches
from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.domain.status import JobOperation

from .helpers import expire_lease, job_row, new_kb, queue_document
from .test_queue import lose_twice_while_another_succeeds


async def _doc_status(container, doc) -> str:
    row = await container.infra.db.fetchone("SELECT status FROM documents WHERE id = %s", (doc,))
    assert row is not None
    return row["status"]


async def test_a_poison_verdict_moves_the_document_only_along_an_edge_the_table_holds(container) -> None:
    """The last lost attempt of a poison file, whose document is OUTDATED meanwhile (the table has no
    OUTDATED -> FAILED edge): the job ends FAILED, the document stays as it is."""
    kb = await new_kb(container)
    container.infra.queue.retry_delay_seconds = 3600
    poison = await queue_document(container, kb, "poison")
    await lose_twice_while_another_succeeds(container, kb, poison)
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (poison,))
    [lease] = await container.infra.queue.claim("worker-c", 1)
    assert lease.document_id == poison
    await container.infra.db.execute("UPDATE documents SET status = 'OUTDATED' WHERE id = %s", (poison,))
    await expire_lease(container, poison)
    await container.infra.queue.claim("converger", 1)
    assert (await job_row(container, poison))["status"] == "FAILED"
    assert await _doc_status(container, poison) == "OUTDATED"


async def _kb_of(container, statuses: dict[str, str]) -> tuple[UUID, dict[str, UUID]]:
    kb = await new_kb(container)
    docs = {}
    for status, job_status in statuses.items():
        doc = await queue_document(container, kb, f"a {status} document")
        await container.infra.db.execute("UPDATE documents SET status = %s WHERE id = %s", (status, doc))
        await container.infra.db.execute("UPDATE ingestion_jobs SET status = %s WHERE document_id = %s", (job_status, doc))
        docs[status] = doc
    return kb, docs


async def test_a_batch_queues_only_documents_and_jobs_the_sources_it_is_given_allow(container) -> None:
    kb, docs = await _kb_of(container, {"READY": "SUCCEEDED", "FAILED": "FAILED", "OUTDATED": "SUCCEEDED"})
    every = frozenset(D)
    params = queue_batch_params(kb, operation=JobOperation.INGEST, force=False, new_revision=True, statuses=every,
                                accepted=every, current_parsers=None, max_attempts=3)
    # a document source the table would not hold (READY) and a job source (SUCCEEDED) left out
    queued, skipped = await queue_in_batches(container.infra.db, {**params, "from_statuses": ["FAILED", "OUTDATED"],
                                                            "job_from": ["FAILED"]}, batch_size=2)
    assert (queued, skipped) == (1, 0)
    assert {s: await _doc_status(container, d) for s, d in docs.items()} == {
        "READY": "READY", "FAILED": "PENDING", "OUTDATED": "OUTDATED"}  # OUTDATED's job was not a source: untouched
    assert [(await job_row(container, docs[s]))["status"] for s in ("READY", "FAILED", "OUTDATED")] == [
        "SUCCEEDED", "PENDING", "SUCCEEDED"]


async def test_a_batch_counts_what_the_operation_refuses_as_skipped(container) -> None:
    kb, docs = await _kb_of(container, {"READY": "SUCCEEDED", "PARSING": "PENDING", "DELETED": "SUCCEEDED"})
    params = queue_batch_params(kb, operation=JobOperation.INGEST, force=False, new_revision=True,
                                statuses=frozenset({D.READY}), accepted=frozenset({D.READY, D.DELETED}),
                                current_parsers=None, max_attempts=3)
    assert await queue_in_batches(container.infra.db, params, batch_size=10) == (1, 1)  # PARSING refused; DELETED not asked
    assert await _doc_status(container, docs["PARSING"]) == "PARSING"
    assert (await job_row(container, docs["PARSING"]))["status"] == "PENDING"

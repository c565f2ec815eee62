"""Fair claims (SPEC §4 "Claim"): one knowledge base's backlog, or one key's within a knowledge base,
does not delay another's first document by more than one job of each flow with a backlog (plus a
tie); deletes go before ingest work; a document queued behind a backlog can be deleted at once."""

from __future__ import annotations

from uuid import UUID, uuid4

from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.domain.status import JobOperation
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.lifecycle import BulkReindexFilter

from .helpers import new_kb, queue_document


async def _upload(container, kb: UUID, name: str, key: str | None = None) -> UUID:
    """An upload as the API makes it (``uploaded_by``: the key's prefix, its flow within the knowledge base)."""
    doc = uuid4()
    data = f"{name}: the quarterly report of the northern depot.".encode()
    object_key = f"{kb}/{doc}/source.txt"
    await container.infra.storage.put(object_key, data, "text/plain")
    await container.ingest.documents.create_with_job(
        document_id=doc, knowledge_base_id=kb, filename=f"{name}.txt", mime_type="text/plain", size_bytes=len(data),
        sha256="0" * 64, object_key=object_key, max_attempts=3, uploaded_by=key)
    return doc


async def _claim_order(container, n: int) -> list[UUID]:
    order = []
    for _ in range(n):
        leases = await container.infra.queue.claim("worker-a", 1)
        if not leases:
            break
        order.append(leases[0].document_id)
    return order


async def test_another_knowledge_base_s_first_document_waits_for_one_job_of_a_backlog(container) -> None:
    big, small = await new_kb(container, "backlog"), await new_kb(container, "one file")
    backlog = [await queue_document(container, big, f"file {i}", filename=f"f{i}.txt") for i in range(30)]
    late = await queue_document(container, small, "the one file")
    order = await _claim_order(container, 31)
    assert late in order[:3], order.index(late)  # at most one job of the backlog's flow (and a tie) first
    assert [d for d in order if d != late] == backlog  # the backlog keeps its own order


async def test_two_backlogs_take_turns(container) -> None:
    a, b = await new_kb(container, "a"), await new_kb(container, "b")
    first = [await queue_document(container, a, f"a {i}", filename=f"a{i}.txt") for i in range(8)]
    second = [await queue_document(container, b, f"b {i}", filename=f"b{i}.txt") for i in range(8)]
    order = await _claim_order(container, 16)
    kb_of = {**dict.fromkeys(first, "a"), **dict.fromkeys(second, "b")}
    runs = [kb_of[d] for d in order]
    # b arrived after a's whole backlog, yet from its first job on the two alternate (ties aside)
    start = runs.index("b")
    assert start <= 2
    assert max(_longest_run(runs[start:], kb) for kb in "ab") <= 2, runs


def _longest_run(runs: list[str], kb: str) -> int:
    longest = current = 0
    for item in runs:
        current = current + 1 if item == kb else 0
        longest = max(longest, current)
    return longest


async def test_one_key_s_upload_does_not_delay_another_key_s_in_the_same_knowledge_base(container) -> None:
    kb = await new_kb(container, "shared")
    for i in range(20):
        await _upload(container, kb, f"bulk {i}", key="urk_bulk")
    mine = await _upload(container, kb, "mine", key="urk_other")
    order = await _claim_order(container, 21)
    assert mine in order[:3], order.index(mine)


async def test_a_bulk_reindex_does_not_delay_another_knowledge_base(container) -> None:
    big, small = await new_kb(container, "rebuilt"), await new_kb(container, "new")
    docs = [await queue_document(container, big, f"doc {i}", filename=f"d{i}.txt") for i in range(12)]
    await container.infra.db.execute(
        "UPDATE documents SET status = 'READY' WHERE id = ANY(%s)", (docs,))
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET status = 'SUCCEEDED', finished_at = now() WHERE document_id = ANY(%s)", (docs,))
    queued, _ = await container.ingest.lifecycle.bulk_reindex(big, BulkReindexFilter.ALL, batch_size=5)
    assert queued == 12
    late = await queue_document(container, small, "uploaded during the rebuild")
    order = await _claim_order(container, 13)
    assert late in order[:3], order.index(late)


async def test_deletes_go_before_ingest_work(container) -> None:
    kb = await new_kb(container, "busy")
    done = await queue_document(container, kb, "already indexed")
    worker = container.worker(WorkerConfig())
    assert await worker.run_until_idle() == 1
    for i in range(10):
        await queue_document(container, kb, f"waiting {i}", filename=f"w{i}.txt")
    await container.ingest.lifecycle.delete(done, hard=False)
    [first] = await container.infra.queue.claim("worker-a", 1)
    assert (first.document_id, first.operation) == (done, JobOperation.DELETE)


async def test_a_document_queued_behind_a_backlog_is_deleted_at_once(client, container) -> None:
    """DELETE on a PENDING document: 202, not 409; its queued ingest becomes a delete that runs first."""
    kb = await new_kb(container, "wrong folder")
    for i in range(10):
        await queue_document(container, kb, f"backlog {i}", filename=f"b{i}.txt")
    wrong = await queue_document(container, kb, "uploaded by mistake", filename="wrong.txt")
    r = await client.delete(f"/api/documents/{wrong}", params={"force": "true"})
    assert r.status_code == 202, r.text
    shown = r.json()
    assert (shown["status"], shown["operation"], shown["searchable"]) == ("PENDING", "delete", False)
    again = await client.delete(f"/api/documents/{wrong}")
    assert again.status_code == 409 and "already queued for deletion" in again.json()["detail"]
    worker = container.worker(WorkerConfig())
    assert await worker.run_until_idle(max_jobs=1) == 1  # the delete, ahead of the ten uploads
    assert (await client.get(f"/api/documents/{wrong}")).status_code == 404  # hard: the row is gone
    remaining = await container.infra.db.fetchone(
        "SELECT count(*) FILTER (WHERE status = 'PENDING') AS pending FROM documents WHERE knowledge_base_id = %s",
        (kb,))
    assert remaining["pending"] == 10


async def test_a_document_waiting_for_a_retry_is_deleted_without_a_409(client, container) -> None:
    kb = await new_kb(container, "retrying")
    doc = await queue_document(container, kb, "waits for its retry")
    [lease] = await container.infra.queue.claim("worker-a")
    await container.infra.queue.fail(lease, error="the embedding service failed (HTTP 500)", will_retry=True,
                                     delay_seconds=300, document_message="attempt 1/3 failed temporarily")
    assert (await container.ingest.documents.get(doc)).status == D.PENDING
    r = await client.delete(f"/api/documents/{doc}")
    assert r.status_code == 202 and r.json()["operation"] == "delete"
    [lease] = await container.infra.queue.claim("worker-a")  # due now, not after the retry's backoff
    assert (lease.document_id, lease.operation) == (doc, JobOperation.DELETE)

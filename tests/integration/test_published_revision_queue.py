"""A rebuild failed by the queue itself keeps the previous revision served (SPEC §4 rule 3): the
lease-expiry convergence of a poison file (queue.sql)."""

from __future__ import annotations

from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.worker import WorkerConfig

from .helpers import new_kb, queue_document
from .test_queue import _lose, _not_due

STILL = "(the previous version, revision 1, is still searchable)"


async def test_a_rebuild_failed_as_poison_keeps_serving_its_previous_revision(container) -> None:
    kb = await new_kb(container)
    poison = await queue_document(container, kb, "The night ferry leaves from pier four.")
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    chunks = await container.documents.chunks(poison)
    container.queue.retry_delay_seconds = 3600  # converged jobs stay out of the way of the next claim
    await container.lifecycle.reindex(poison)
    healthy = await queue_document(container, kb, "healthy")
    await _not_due(container, healthy)
    await _lose(container, poison, "worker-a")
    await _lose(container, poison, "worker-b")
    await container.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (healthy,))
    [ok] = await container.queue.claim("worker-c")
    await container.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (healthy,))
    await container.pipeline.complete_already_ready(ok)
    await _lose(container, poison, "worker-c")

    document = await container.documents.get(poison)
    assert document.status == D.FAILED and document.searchable and document.published_revision == 1
    assert "stopped the worker processing it 3 times" in document.error_message
    assert document.error_message.endswith(STILL)
    assert await container.documents.chunks(poison) == chunks
    hits = await container.search.search(kb, "night ferry pier", 5)
    assert [h.document_id for h in hits] == [poison]

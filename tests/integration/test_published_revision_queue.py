"""A rebuild failed by the queue itself keeps the previous revision served (SPEC §4 rule 3): the
lease-expiry convergence of a poison file (queue.sql)."""

from __future__ import annotations

from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.job_loop import WorkerConfig

from .helpers import new_kb, queue_document
from .test_queue import _lose, lose_twice_while_another_succeeds

STILL = "(the previous version, revision 1, is still searchable)"


async def test_a_rebuild_failed_as_poison_keeps_serving_its_previous_revision(container) -> None:
    kb = await new_kb(container)
    poison = await queue_document(container, kb, "The night ferry leaves from pier four.")
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    chunks = await container.ingest.documents.chunks(poison)
    container.infra.queue.retry_delay_seconds = 3600  # converged jobs stay out of the way of the next claim
    await container.ingest.lifecycle.reindex(poison)
    await lose_twice_while_another_succeeds(container, kb, poison)
    await _lose(container, poison, "worker-c")

    document = await container.ingest.documents.get(poison)
    assert document.status == D.FAILED and document.searchable and document.published_revision == 1
    assert "stopped the worker processing it 3 times" in document.error_message
    assert document.error_message.endswith(STILL)
    assert await container.ingest.documents.chunks(poison) == chunks
    hits = await container.retrieval.search.search(kb, "night ferry pier", 5)
    assert [h.document_id for h in hits] == [poison]

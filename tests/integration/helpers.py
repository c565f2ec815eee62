"""Small helpers for integration tests: knowledge bases and queued documents without the API."""

from __future__ import annotations

import hashlib
from uuid import UUID, uuid4

from ultimate_rag.adapters.embedders.engine_embedders import apply_engine
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.ports import Embedder


async def new_kb(container, name: str | None = None) -> UUID:
    kb = await container.ingest.knowledge_bases.create(name or f"kb-{uuid4().hex[:8]}", "", KnowledgeBaseSettings())
    return kb.id


async def queue_document(container, kb_id: UUID, text: str = "hello world", *,
                         filename: str = "doc.txt", max_attempts: int = 3) -> UUID:
    doc_id = uuid4()
    key = f"{kb_id}/{doc_id}/source.txt"
    data = text.encode()
    await container.infra.storage.put(key, data, "text/plain")
    await container.ingest.documents.create_with_job(
        document_id=doc_id, knowledge_base_id=kb_id, filename=filename, mime_type="text/plain",
        size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), object_key=key, max_attempts=max_attempts,
    )
    return doc_id


async def expire_lease(container, document_id: UUID, seconds: float = 3600) -> None:
    """Move a running job's lease into the past, as if its worker had stopped heartbeating: to no
    earlier than the database server's start (a lease last renewed before it reads as cut by the
    database's outage, see the claim in queue.sql). A server younger than the queue's lease gets a
    queue with a lease that short, so the moved lease has expired."""
    up = (await container.infra.db.fetchone(
        "SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8 AS up"))["up"]
    queue = container.infra.queue
    queue.lease_seconds = min(queue.lease_seconds, max(up - 0.2, 0.05))
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET locked_at = greatest(locked_at - make_interval(secs => %s),"
        " pg_postmaster_start_time() + interval '1 millisecond') WHERE document_id = %s",
        (seconds, document_id),
    )


async def job_row(container, document_id: UUID) -> dict:
    row = await container.infra.db.fetchone("SELECT * FROM ingestion_jobs WHERE document_id = %s", (document_id,))
    assert row is not None
    return row


def use_embedder(container, embedder: Embedder, *, batch_size: int | None = None) -> None:
    """The knowledge bases' default model becomes ``embedder`` (a fault-injecting or slowed wrapper
    of the real one), behind an embedding engine of its own, as the composition root puts every
    embedder: the pipeline runs production's path. ``batch_size``: texts per call to it (default:
    the settings' request batch). The container closes the engine with the others."""
    size = batch_size or container.settings.embedding_request_batch_size
    container.embedding.service.embedder, _ = apply_engine(embedder, None, threads=1, local_batch=size, remote_batch=size,
                                                   max_in_flight=1, max_wait=0.0)

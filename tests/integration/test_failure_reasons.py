"""What readers see when a job fails: infrastructure errors (database, object storage, embedding
service) are mapped to reasons without hosts, users or buckets — in the document's error message and
in the job's error history, both of which the API shows to readers — and a value the database can
never store fails the document once, permanently, with a readable reason."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

from ultimate_rag.adapters.embedders.openai import OpenAICompatibleEmbedder
from ultimate_rag.adapters.postgres.errors import translated
from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.failures import explain
from ultimate_rag.testing.servers import free_port

from .helpers import job_row, new_kb, queue_document, use_embedder
from .test_pipeline_faults import worker_for

DB_MESSAGE = ('connection to server at "db.internal" (10.0.3.7), port 5432 failed: FATAL: '
              'password authentication failed for user "rag_owner"')


class NulChunker:
    """Wraps the real chunker and appends a NUL to the first chunk: fault injection after parsing,
    past any sanitising of parser output, to reach the database with a value it cannot store."""

    def __init__(self, real) -> None:
        self.real = real

    def split(self, parsed, **kwargs):
        chunks = self.real.split(parsed, **kwargs)
        return [replace(chunks[0], content=chunks[0].content + "\x00tail"), *chunks[1:]]


async def shown(client, doc) -> dict:
    r = await client.get(f"/api/documents/{doc}")
    assert r.status_code == 200
    return r.json()


async def test_a_nul_character_fails_the_document_once_with_a_readable_reason(container) -> None:
    container.ingest.processor._chunker = NulChunker(container.ingest.processor._chunker)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "A sentence.\n\nAnother sentence about the harbour.")
    await worker_for(container).run_until_idle(max_jobs=1)  # one attempt, no retry scheduled
    final = await container.ingest.documents.get(doc)
    assert final.status == D.FAILED and final.attempts == 1
    assert final.error_message == "the document contains data the database cannot store: a NUL character (0x00) in its text"
    job = await job_row(container, doc)
    assert job["status"] == "FAILED" and [h["error"] for h in job["error_history"]] == [final.error_message]
    assert await container.embedding.default_index.count_by_document(doc) == 0


@pytest.mark.parametrize(("error", "expected"), [
    (psycopg.errors.CharacterNotInRepertoire("invalid byte sequence for encoding \"UTF8\": 0xff"),
     "characters that are not valid in the database's encoding"),
    (psycopg.errors.NumericValueOutOfRange("integer out of range"), "a number outside the range"),
    (psycopg.errors.StringDataRightTruncation("value too long for type character varying(10)"),
     "a value longer than the database allows"),
    (psycopg.errors.ProgramLimitExceeded("index row size 9000 exceeds btree version 4 maximum 2704"),
     "a value larger than a database limit allows"),
])
def test_deterministic_data_errors_are_permanent(error: psycopg.Error, expected: str) -> None:
    failure = explain(translated(error))  # as the postgres adapters raise it
    assert failure.permanent and failure.reason.startswith("the document contains data the database cannot store: ")
    assert expected in failure.reason


async def test_a_database_error_reaches_readers_without_host_or_user(client, container, monkeypatch) -> None:
    async def broken(*_: object) -> None:  # the index generations' write fails as a lost database does
        raise translated(psycopg.OperationalError(DB_MESSAGE))

    monkeypatch.setattr(container.embedding.indexes, "write", broken)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "text")
    await worker_for(container).run_until_idle(max_jobs=1)
    body = await shown(client, doc)
    assert body["status"] == "PENDING"
    assert body["error_message"] == (  # an outage: given back, not spent
        "attempt 1 was interrupted because the database was unavailable; "
        "this does not count as a failed attempt, retrying automatically in 0 s")
    assert [h["error"] for h in body["error_history"]] == ["the database was unavailable"]
    text = str(body)
    assert "db.internal" not in text and "10.0.3.7" not in text and "rag_owner" not in text


async def test_an_unreachable_embedding_service_is_named_without_its_address(client, container) -> None:
    port = free_port()  # nothing listens there: a real connection refusal from the real HTTP embedder
    real = container.embedding.service.embedder
    http = OpenAICompatibleEmbedder(base_url=f"http://127.0.0.1:{port}/v1", model=real.name,
                                    dimension=real.dimension, max_retries=0, connect_timeout=2)
    use_embedder(container, http)
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "Some text for a service that is down.", max_attempts=1)
    try:
        await worker_for(container).run_until_idle(max_jobs=1)
    finally:
        await http.aclose()
    body = await shown(client, doc)
    # an outage is not the document's fault: the attempt is given back, even on its last one
    job = await job_row(container, doc)
    assert (body["status"], job["attempts"], job["max_attempts"]) == ("PENDING", 1, 2)  # given back
    assert body["error_message"].startswith(
        "attempt 1 was interrupted because the embedding service failed (ConnectError); "
        "this does not count as a failed attempt, retrying automatically")
    assert str(port) not in str(body) and "127.0.0.1" not in str(body)

"""Observability against a real database and the real model: the API's /metrics gauges, each
worker's own metrics (claims, successes, retries, failures by class, lease losses, stage durations,
embedder seconds), JSON logs that carry the job's ids and no secrets, and the stuck-document list."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence
from uuid import UUID

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ultimate_rag.domain.auth import Role
from ultimate_rag.domain.errors import TransientError
from ultimate_rag.logs import log_context, make_handler
from ultimate_rag.services.job_loop import WorkerConfig

from .helpers import new_kb, queue_document, use_embedder


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def push_back(container, document_id: UUID, seconds: float) -> None:
    await container.infra.db.execute(
        "UPDATE documents SET updated_at = now() - make_interval(secs => %s) WHERE id = %s", (seconds, document_id))


class ScriptedEmbedder:
    """The real model, with a scripted failure or an operator's cancel on chosen calls."""

    def __init__(self, real, on_call=None) -> None:
        self.real, self.on_call, self.calls = real, on_call or {}, 0
        self.name, self.dimension, self.max_tokens = real.name, real.dimension, real.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        action = self.on_call.get(self.calls)
        if action is not None:
            await action()
        return await self.real.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.real.embed_query(text)


async def test_metrics_report_queue_depth_oldest_due_job_and_stuck_documents(client, container) -> None:
    kb = await new_kb(container)
    due_recent = await queue_document(container, kb, "one")
    due_old = await queue_document(container, kb, "two")
    later = await queue_document(container, kb, "three")
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET available_at = now() - interval '120 seconds' WHERE document_id = %s", (due_old,))
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET available_at = now() + interval '1 hour' WHERE document_id = %s", (later,))
    await push_back(container, due_old, 7200)
    assert due_recent

    r = await client.get("/metrics", headers={"Authorization": ""})
    assert r.status_code == 200
    found = samples(r.text)
    assert found[("ultimate_rag_documents", (("status", "PENDING"),))] == 3
    assert found[("ultimate_rag_queue_depth", ())] == 2
    assert 120 <= found[("ultimate_rag_queue_oldest_available_seconds", ())] < 180
    assert found[("ultimate_rag_documents_stuck", (("status", "PENDING"),))] == 1
    assert found[("ultimate_rag_documents_stuck", (("status", "PARSING"),))] == 0
    assert found[("ultimate_rag_jobs", (("status", "PENDING"),))] == 3


async def test_metrics_on_an_empty_queue(client) -> None:
    found = samples((await client.get("/metrics")).text)
    assert found[("ultimate_rag_queue_depth", ())] == 0
    assert found[("ultimate_rag_queue_oldest_available_seconds", ())] == 0


async def test_worker_metrics_count_claims_outcomes_failure_classes_and_stage_durations(container, embedder) -> None:
    async def unavailable() -> None:
        raise TransientError("embedding service returned 503")

    use_embedder(container, ScriptedEmbedder(embedder, {1: unavailable}))
    worker = container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0))
    worker.metrics.watch_embedding(container.embedding.service)
    kb = await new_kb(container)
    flaky = await queue_document(container, kb, "The lighthouse keeper logs every passing ship.")
    await worker.run_until_idle(max_jobs=1)  # attempt 1 fails and is retried
    await worker.run_until_idle()  # attempt 2 succeeds
    empty = await queue_document(container, kb, " \n\t ")  # nothing to index: a permanent failure
    await worker.run_until_idle()

    value = worker.metrics.registry.get_sample_value
    assert (await container.ingest.documents.get(flaky)).status == "READY"
    assert (await container.ingest.documents.get(empty)).status == "FAILED"
    assert value("ultimate_rag_worker_jobs_claimed_total") == 3
    assert value("ultimate_rag_worker_jobs_succeeded_total", {"operation": "ingest"}) == 1
    assert value("ultimate_rag_worker_job_retries_total") == 1
    assert value("ultimate_rag_worker_job_failures_total",
                 {"error_class": "TransientError", "outcome": "retry"}) == 1
    assert value("ultimate_rag_worker_job_failures_total",
                 {"error_class": "InvalidDocumentError", "outcome": "failed"}) == 1
    for stage in ("PARSING", "CHUNKING", "EMBEDDING", "INDEXING"):
        assert value("ultimate_rag_worker_stage_duration_seconds_count", {"stage": stage}) == 1, stage
    assert value("ultimate_rag_worker_stage_duration_seconds_sum", {"stage": "EMBEDDING"}) > 0
    assert value("ultimate_rag_worker_embedder_seconds_total") > 0

    # an already READY document completes without a run: no second observation
    await container.infra.db.execute("UPDATE ingestion_jobs SET status = 'PENDING' WHERE document_id = %s", (flaky,))
    await worker.run_until_idle()
    assert value("ultimate_rag_worker_stage_duration_seconds_count", {"stage": "PARSING"}) == 1
    assert value("ultimate_rag_worker_jobs_succeeded_total", {"operation": "ingest"}) == 2

    # a delete is one stage, timed by the worker
    await container.ingest.lifecycle.delete(flaky, hard=True)
    await worker.run_until_idle()
    assert value("ultimate_rag_worker_jobs_succeeded_total", {"operation": "delete"}) == 1
    assert value("ultimate_rag_worker_stage_duration_seconds_count", {"stage": "DELETING"}) == 1


async def test_worker_metrics_count_a_lease_lost_to_an_operator(container, embedder) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "Cancelled while it was being embedded.")

    async def operator_cancels() -> None:
        await container.ingest.lifecycle.fail(doc)

    use_embedder(container, ScriptedEmbedder(embedder, {1: operator_cancels}))
    worker = container.worker(WorkerConfig(heartbeat_seconds=5))
    await worker.run_until_idle()
    assert (await container.ingest.documents.get(doc)).status == "FAILED"
    assert worker.metrics.registry.get_sample_value("ultimate_rag_worker_lease_losses_total") == 1
    assert worker.metrics.registry.get_sample_value("ultimate_rag_worker_jobs_succeeded_total",
                                                    {"operation": "ingest"}) is None


async def test_each_worker_has_its_own_registry_and_serves_it(container) -> None:
    a, b = container.worker(WorkerConfig()), container.worker(WorkerConfig())
    kb = await new_kb(container)
    await queue_document(container, kb, "Served by the worker itself.")
    await a.run_until_idle()
    assert a.metrics.registry.get_sample_value("ultimate_rag_worker_jobs_claimed_total") == 1
    assert b.metrics.registry.get_sample_value("ultimate_rag_worker_jobs_claimed_total") == 0
    port = a.metrics.serve(0)
    try:
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{port}/metrics")
        assert r.status_code == 200 and "ultimate_rag_worker_jobs_claimed_total 1.0" in r.text
    finally:
        a.metrics.stop()


async def test_json_logs_carry_the_job_ids_and_no_secrets(container, embedder) -> None:
    async def unavailable() -> None:
        raise TransientError("embedding service returned 503")

    use_embedder(container, ScriptedEmbedder(embedder, {1: unavailable}))
    stream = io.StringIO()
    handler = make_handler("json", secrets=["sk-very-secret-key"], stream=stream)
    logger = logging.getLogger("ultimate_rag")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        kb = await new_kb(container)
        doc = await queue_document(container, kb, "A line for the logs.")
        worker = container.worker(WorkerConfig(heartbeat_seconds=5), worker_id="worker-7")
        await worker.run_until_idle(max_jobs=1)
        with log_context(document_id=doc):
            logging.getLogger("ultimate_rag.test").warning(
                "connecting to postgresql://rag:hunter2@db/rag with key sk-very-secret-key")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    failure = next(line for line in lines if "attempt 1/" in line["message"] and "failed" in line["message"])
    assert failure["document_id"] == str(doc) and failure["worker_id"] == "worker-7" and failure["job_id"]
    assert failure["level"] == "WARNING" and failure["logger"] == "ultimate_rag.services.job_loop"
    last = next(line["message"] for line in lines if line["message"].startswith("connecting to"))
    assert "hunter2" not in last and "sk-very-secret-key" not in last
    assert "postgresql://rag:***@db/rag" in last


async def test_stuck_documents_are_listed_oldest_first_for_admins_only(client, container) -> None:
    from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository

    kb = await new_kb(container)
    fresh = await queue_document(container, kb, "fresh", filename="fresh.txt")
    stuck = await queue_document(container, kb, "stuck", filename="stuck.txt")
    older = await queue_document(container, kb, "older", filename="older.txt")
    await push_back(container, stuck, 2000)
    await push_back(container, older, 5000)
    ready = await queue_document(container, kb, "ready")
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (ready,))
    await push_back(container, ready, 9000)  # stable documents are never stuck

    r = await client.get("/api/documents/stuck")
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["id"] for i in items] == [str(older), str(stuck)]
    first = items[0]
    assert first["filename"] == "older.txt" and first["status"] == "PENDING" and first["knowledge_base_id"] == str(kb)
    assert 5000 <= first["seconds_in_status"] < 5100 and first["attempts"] == 0 and first["locked_by"] is None
    assert "updated_at" in first

    r = await client.get("/api/documents/stuck", params={"older_than_seconds": 3000})
    assert [i["id"] for i in r.json()["items"]] == [str(older)]
    r = await client.get("/api/documents/stuck", params={"older_than_seconds": 0, "limit": 2})
    assert [i["id"] for i in r.json()["items"]] == [str(older), str(stuck)]
    assert (await client.get("/api/documents/stuck", params={"limit": 501})).status_code == 422
    assert (await client.get(f"/api/documents/{fresh}")).status_code == 200

    editor = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={kb: Role.EDITOR})
    r = await client.get("/api/documents/stuck", headers={"Authorization": f"Bearer {editor}"})
    assert r.status_code == 403
    assert (await client.get("/api/documents/stuck", headers={"Authorization": ""})).status_code == 401

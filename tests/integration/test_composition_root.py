"""``bootstrap.build`` is the one composition root, one ``wire`` per feature: the janitor, the events
hub, the key, audit and operations repositories and the connector services all come from it, and
the worker and the routes use those (nothing is patched in after build or built per request)."""

from __future__ import annotations

from ultimate_rag.services.job_loop import WorkerConfig


async def test_build_wires_everything_the_processes_use(container) -> None:
    worker = container.worker(WorkerConfig())
    assert worker.janitor is container.maintenance.janitor
    assert worker.connector_runner is container.connectors.runner
    assert container.maintenance.janitor.with_grace(None) is container.maintenance.janitor
    assert container.maintenance.janitor.with_grace(0).grace_seconds == 0
    assert container.maintenance.janitor.grace_seconds == container.settings.orphan_grace_seconds
    # the pipeline's services get their ports from here: the lease, the repository, the index generations
    assert worker.queue is container.infra.queue
    assert container.ingest.processor._store is container.ingest.pipeline and container.ingest.document_deletion._store is container.ingest.pipeline
    # one vector path: every service that writes, deletes or searches vectors sees the generations router
    indexes = container.embedding.indexes
    assert container.ingest.processor._indexes is indexes and container.retrieval.search._vectors is indexes
    assert container.ingest.document_deletion._vectors is indexes and container.ingest.lifecycle._vectors is indexes


async def test_routes_use_the_containers_events_hub(client, container, monkeypatch) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "events"})).json()["id"]
    subscribed = []
    real = container.infra.events.subscribe

    def recording(knowledge_base_id):
        subscribed.append(str(knowledge_base_id))
        return real(knowledge_base_id)

    monkeypatch.setattr(container.infra.events, "subscribe", recording)
    r = await client.get(f"/api/knowledge-bases/{kb}/events", params={"max_seconds": 1})
    assert r.status_code == 200 and "event: ready" in r.text
    assert subscribed == [kb]  # the container's hub served the stream

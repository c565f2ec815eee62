"""Switching backends is configuration only: the composition root picks each adapter from the
settings, refuses incomplete settings with a readable message, and /readyz reports every
configured backend (503 when one does not answer)."""

from __future__ import annotations

from typing import cast

import httpx
import pytest

from ultimate_rag.adapter_factories import make_embedder, make_storage, make_vector_store
from ultimate_rag.adapters.embedders.openai import OpenAICompatibleEmbedder
from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.adapters.storage.local import LocalObjectStorage
from ultimate_rag.adapters.storage.s3 import S3ObjectStorage
from ultimate_rag.adapters.vectors.milvus import MilvusVectorStore
from ultimate_rag.adapters.vectors.qdrant import QdrantVectorStore
from ultimate_rag.bootstrap import build
from ultimate_rag.settings import Settings
from ultimate_rag.testing.servers import SeaweedS3, free_port

from ..conftest import ADMIN_KEY


def test_adapters_follow_the_settings(tmp_path) -> None:
    assert isinstance(make_storage(Settings(data_dir=tmp_path)), LocalObjectStorage)
    s3 = make_storage(Settings(storage_url="s3://bucket/pre/fix", s3_endpoint_url="http://127.0.0.1:9",
                               s3_access_key_id="a", s3_secret_access_key="b"))
    assert isinstance(s3, S3ObjectStorage) and (s3.bucket, s3.prefix) == ("bucket", "pre/fix/")
    with pytest.raises(ValueError, match="s3://"):
        make_storage(Settings(storage_url="gs://bucket"))

    embedder = make_embedder(Settings(embedder="openai", embedding_base_url="http://127.0.0.1:9/v1",
                                      embedding_model="text-embedding-v3", embedding_dimensions=1024))
    assert isinstance(embedder, OpenAICompatibleEmbedder) and (embedder.name, embedder.dimension) == (
        "text-embedding-v3", 1024)
    with pytest.raises(ValueError, match="ULTIMATE_RAG_EMBEDDING_DIMENSIONS"):
        make_embedder(Settings(embedder="openai", embedding_base_url="http://x/v1", embedding_model="m"))
    with pytest.raises(ValueError, match="'local' or 'openai'"):
        make_embedder(Settings(embedder="cohere"))

    no_db = cast(Database, None)  # the Milvus and Qdrant stores never touch PostgreSQL
    milvus = make_vector_store(Settings(vector_store="milvus", milvus_uri="http://127.0.0.1:9"), no_db, 1024,
                               "text-embedding-v3")
    assert isinstance(milvus, MilvusVectorStore) and milvus.collection == "urag_text_embedding_v3_1024"
    qdrant = make_vector_store(Settings(vector_store="qdrant", qdrant_path=str(tmp_path / "q")), no_db, 384, "m")
    assert isinstance(qdrant, QdrantVectorStore)
    with pytest.raises(ValueError, match="ULTIMATE_RAG_MILVUS_URI"):
        make_vector_store(Settings(vector_store="milvus"), no_db, 8)
    with pytest.raises(ValueError, match="'pgvector', 'milvus' or 'qdrant'"):
        make_vector_store(Settings(vector_store="faiss"), no_db, 8)


async def test_readyz_reports_each_backend(db_url, tmp_path, embedder, seaweed: SeaweedS3) -> None:
    from ultimate_rag.api.app import create_app

    settings = Settings(database_url=db_url, data_dir=tmp_path, admin_key=ADMIN_KEY, storage_url="s3://urag-ready/x",
                        s3_endpoint_url=seaweed.endpoint_url, s3_access_key_id=seaweed.access_key,
                        s3_secret_access_key=seaweed.secret_key, s3_create_bucket=True,
                        vector_store="qdrant", qdrant_path=str(tmp_path / "qdrant"))
    storage = make_storage(settings)
    assert isinstance(storage, S3ObjectStorage)
    storage.ensure_bucket(create=True)
    container = build(settings, url=db_url, embedder=embedder, pool_size=3)
    await container.open()
    try:
        app = create_app(container=container)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            r = await client.get("/readyz")
            assert r.status_code == 200 and r.json() == {"status": "ready", "database": True, "storage": True,
                                                         "vectors": True}
            assert isinstance(container.infra.storage, S3ObjectStorage)
            container.infra.storage._client.meta.events.register(
                "before-send.s3.HeadBucket", lambda **_: (_ for _ in ()).throw(ConnectionError("down")))
            r = await client.get("/readyz")
            assert r.status_code == 503 and r.json()["storage"] is False and r.json()["database"] is True
    finally:
        await container.close()


async def test_readyz_is_503_when_the_embedding_endpoint_is_down(db_url, tmp_path) -> None:
    from ultimate_rag.api.app import create_app

    settings = Settings(database_url=db_url, data_dir=tmp_path, admin_key=ADMIN_KEY, embedder="openai",
                        embedding_base_url=f"http://127.0.0.1:{free_port()}/v1", embedding_model="m",
                        embedding_dimensions=8, embedding_max_retries=0)
    container = build(settings, url=db_url, pool_size=3)
    await container.open()
    try:
        app = create_app(container=container)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            r = await client.get("/readyz")
        assert r.status_code == 503 and r.json() == {"status": "unavailable", "database": True, "embedder": False}
    finally:
        await container.close()

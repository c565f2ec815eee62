"""The VectorStore contract, and the hybrid-search contract, against pgvector (real PostgreSQL), Milvus (``milvus-lite server``: a
separate gRPC server process that API and worker processes share, exactly as they would share
Milvus standalone) and Qdrant. No Qdrant server can be installed here, so Qdrant runs on
qdrant-client's embedded local engine (exact search, payload indexes ignored): the same client
API and the same adapter code as against a server, except the server-only index settings."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.adapters.vectors.milvus import MilvusVectorStore, collection_name
from ultimate_rag.adapters.vectors.pgvector import PgVectorStore
from ultimate_rag.adapters.vectors.qdrant import QdrantVectorStore
from ultimate_rag.adapters.vectors.sparse_pg import HybridVectors
from ultimate_rag.domain.errors import TransientError
from ultimate_rag.testing import VectorStoreContract
from ultimate_rag.testing.contracts import embedded, unit_vector
from ultimate_rag.testing.hybrid_contract import HybridVectorStoreContract
from ultimate_rag.testing.servers import MilvusLiteServer, free_port

MODEL = "contract-model"


class TestPgVectorStore(VectorStoreContract):
    @pytest.fixture
    async def vector_store(self, db_url: str) -> AsyncIterator[PgVectorStore]:
        db = Database(db_url, max_size=4)
        await db.open()
        store = PgVectorStore(db, self.dimension)
        await store.ensure_ready()
        yield store
        await db.close()


class TestMilvusVectorStore(VectorStoreContract):
    @pytest.fixture
    async def vector_store(self, milvus_server: MilvusLiteServer) -> AsyncIterator[MilvusVectorStore]:
        store = MilvusVectorStore(uri=milvus_server.uri, dimension=self.dimension, model=MODEL, batch_size=500)
        await store.ensure_ready()
        yield store
        await store.aclose()


class TestQdrantLocalVectorStore(VectorStoreContract):
    @pytest.fixture
    async def vector_store(self, tmp_path: Path) -> AsyncIterator[QdrantVectorStore]:
        store = QdrantVectorStore(path=str(tmp_path / "qdrant"), dimension=self.dimension, model=MODEL,
                                  batch_size=256)
        await store.ensure_ready()
        yield store
        await store.aclose()


def test_one_collection_per_model_and_dimension() -> None:
    assert collection_name("text-embedding-v3", 1024) == "urag_text_embedding_v3_1024"
    assert collection_name("text-embedding-v3", 512) != collection_name("text-embedding-v3", 1024)
    assert collection_name("BAAI/bge-m3", 1024) == "urag_baai_bge_m3_1024"


async def test_milvus_collection_schema(milvus_server: MilvusLiteServer) -> None:
    store = MilvusVectorStore(uri=milvus_server.uri, dimension=8, model="schema-check")
    await store.ensure_ready()
    described = store._get().describe_collection(store.collection)
    fields = {f["name"]: f for f in described["fields"]}
    assert fields["chunk_id"].get("is_primary") is True
    assert fields["knowledge_base_id"].get("is_partition_key") is True
    assert {"document_id", "knowledge_base_id", "embedding"} <= set(store._get().list_indexes(store.collection))
    await store.aclose()


async def test_milvus_restart_keeps_vectors_and_reloads(tmp_path: Path) -> None:
    """After a Milvus restart collections come back released: ensure_ready (and a search that
    finds the collection released) loads it again."""
    port = free_port()
    server = MilvusLiteServer(tmp_path / "milvus", port=port).start()
    rng = random.Random(3)
    kb, doc = uuid4(), uuid4()
    items = [embedded(kb, doc, unit_vector(rng, 8), i) for i in range(10)]
    try:
        store = MilvusVectorStore(uri=server.uri, dimension=8, model="restart")
        await store.ensure_ready()
        await store.upsert(kb, items)
        assert await store.count_by_document(doc) == 10
        await store.aclose()
        server.stop()
        server = MilvusLiteServer(tmp_path / "milvus", port=port).start()
        store = MilvusVectorStore(uri=server.uri, dimension=8, model="restart")
        hits = await store.search(kb, items[4].embedding, 3)  # released after the restart: loaded on demand
        assert hits[0].chunk_id == items[4].chunk.id
        await store.ensure_ready()
        assert await store.count_by_document(doc) == 10
        await store.aclose()
    finally:
        server.stop()


async def test_milvus_unreachable_is_transient() -> None:
    store = MilvusVectorStore(uri=f"http://127.0.0.1:{free_port()}", dimension=8, model="x", timeout=2, max_retries=1)
    with pytest.raises(TransientError):
        await store.ensure_ready()


# --- hybrid search: the stores as bootstrap builds them (the sparse side in PostgreSQL) ---------
class TestPgVectorHybrid(HybridVectorStoreContract):
    @pytest.fixture
    async def hybrid(self, db_url: str) -> AsyncIterator[tuple[PgVectorStore, Database]]:
        db = Database(db_url, max_size=4)
        await db.open()
        store = PgVectorStore(db, self.dimension)
        await store.ensure_ready()
        yield store, db
        await db.close()


class TestMilvusHybrid(HybridVectorStoreContract):
    @pytest.fixture
    async def hybrid(self, db_url: str, milvus_server: MilvusLiteServer) -> AsyncIterator[tuple[HybridVectors, Database]]:
        db = Database(db_url, max_size=4)
        await db.open()
        dense = MilvusVectorStore(uri=milvus_server.uri, dimension=self.dimension, model=f"hybrid-{uuid4().hex[:6]}",
                                  consistency_level="Strong")
        store = HybridVectors(dense, db)
        await store.ensure_ready()
        yield store, db
        await dense.aclose()
        await db.close()


class TestQdrantLocalHybrid(HybridVectorStoreContract):
    @pytest.fixture
    async def hybrid(self, db_url: str, tmp_path: Path) -> AsyncIterator[tuple[HybridVectors, Database]]:
        db = Database(db_url, max_size=4)
        await db.open()
        dense = QdrantVectorStore(path=str(tmp_path / "qdrant"), dimension=self.dimension, model=MODEL)
        store = HybridVectors(dense, db)
        await store.ensure_ready()
        yield store, db
        await dense.aclose()
        await db.close()

"""Milvus (standalone, cluster, or Milvus Lite in server mode) through ``pymilvus``.

* One collection per embedding model and dimension (``urag_<model>_<dim>``): two models never
  share a vector space.
* ``chunk_id`` (the chunk's UUID) is the primary key, so an upsert of a retried job replaces
  instead of duplicating; ``knowledge_base_id`` is the **partition key** (Milvus hashes it into
  ``num_partitions`` partitions, and a search filtered on it only reads its own partition);
  ``document_id`` and ``knowledge_base_id`` carry INVERTED scalar indexes for the filtered deletes
  and counts; the vectors an HNSW index with cosine similarity.
* Upserts are sent ``batch_size`` rows at a time.
* **Consistency level**: searches use ``Bounded`` (the default, configurable with
  ``ULTIMATE_RAG_MILVUS_CONSISTENCY_LEVEL``): a search may see the index as it was up to the
  bounded staleness window ago. That is safe here because every hit is re-checked against
  PostgreSQL (only chunks of READY documents are returned — the double filter), so a deleted or
  half-written document's stale vectors never reach a user; the only effect is that a document
  that just became READY may take that window to appear in results. Reads whose answer the
  pipeline acts on (``count_by_document``) use ``Strong``.
* A collection is loaded into memory by ``ensure_ready`` (after a Milvus restart collections come
  back released, and a search on a released collection fails): a search that finds it released
  loads it and tries once more.

Blocking ``pymilvus`` calls run in threads; the client is thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar
from uuid import UUID

from ...domain.errors import PermanentError, TransientError
from ...domain.models import EmbeddedChunk, VectorHit
from ..backends import import_backend
from .similarity import cosine_hits

log = logging.getLogger(__name__)
T = TypeVar("T")
CONSISTENCY_LEVELS = ("Strong", "Session", "Bounded", "Eventually")


def collection_name(model: str, dimension: int, prefix: str = "urag") -> str:
    slug = re.sub(r"[^0-9A-Za-z]+", "_", model).strip("_").lower()[:120] or "model"
    return f"{prefix}_{slug}_{int(dimension)}"


def _pymilvus() -> ModuleType:
    return import_backend("pymilvus", "the Milvus vector store")


class MilvusVectorStore:
    def __init__(self, *, uri: str, dimension: int, model: str, token: str | None = None,
                 consistency_level: str = "Bounded", batch_size: int = 500, num_partitions: int = 16,
                 timeout: float = 30.0, collection_prefix: str = "urag", max_retries: int = 3) -> None:
        if consistency_level not in CONSISTENCY_LEVELS:
            raise ValueError(f"unknown Milvus consistency level {consistency_level!r}: one of {CONSISTENCY_LEVELS}")
        self.uri = uri
        self.dimension = int(dimension)
        self.collection = collection_name(model, dimension, collection_prefix)
        self._token = token
        self._consistency = consistency_level
        self._batch_size = max(1, batch_size)
        self._num_partitions = num_partitions
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._client: Any = None

    def _get(self) -> Any:
        if self._client is None:
            pymilvus = _pymilvus()
            self._client = pymilvus.MilvusClient(uri=self.uri, token=self._token or "", timeout=self._timeout)
        return self._client

    async def _run(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Every call here is idempotent (upsert by primary key, delete by filter, reads), so a
        failure — a dropped gRPC channel, a server busy or restarting — is retried a few times
        with backoff before it becomes the job's transient error."""
        attempt = 0
        while True:
            try:
                return await asyncio.to_thread(fn, *args, **kwargs)
            except (PermanentError, TransientError):
                raise
            except Exception as exc:
                attempt += 1
                if attempt > self._max_retries:
                    raise TransientError(f"Milvus could not {what}: {exc}", service="vector index") from exc
                log.info("Milvus could not %s (%s); retry %d/%d", what, exc, attempt, self._max_retries)
                await asyncio.sleep(min(5.0, 0.2 * 2 ** (attempt - 1)))

    # the port --------------------------------------------------------------------------------
    async def ensure_ready(self) -> None:
        await self._run("prepare its collection", self._ensure_ready)

    def _ensure_ready(self) -> None:
        client = self._get()
        if not client.has_collection(self.collection):
            self._create(client)
        else:
            self._check_dimension(client)
        client.load_collection(self.collection)

    def _create(self, client: Any) -> None:
        DataType = _pymilvus().DataType
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("chunk_id", DataType.VARCHAR, max_length=36, is_primary=True)
        schema.add_field("document_id", DataType.VARCHAR, max_length=36)
        schema.add_field("knowledge_base_id", DataType.VARCHAR, max_length=36, is_partition_key=True)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=self.dimension)
        index = client.prepare_index_params()
        index.add_index("embedding", index_type="HNSW", metric_type="COSINE", params={"M": 16, "efConstruction": 200})
        index.add_index("document_id", index_type="INVERTED")
        index.add_index("knowledge_base_id", index_type="INVERTED")
        try:
            client.create_collection(self.collection, schema=schema, index_params=index,
                                     num_partitions=self._num_partitions, consistency_level=self._consistency)
        except Exception:
            if not client.has_collection(self.collection):  # another process created it meanwhile: fine
                raise

    def _check_dimension(self, client: Any) -> None:
        described = client.describe_collection(self.collection)
        for field in described.get("fields", []):
            if field.get("name") == "embedding":
                dim = int((field.get("params") or {}).get("dim", self.dimension))
                if dim != self.dimension:
                    raise PermanentError(f"the Milvus collection {self.collection} holds {dim}-dimensional vectors, "
                                         f"not {self.dimension}")

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        if not items:
            return
        kb = str(knowledge_base_id)
        rows = [{"chunk_id": str(i.chunk.id), "document_id": str(i.chunk.document_id), "knowledge_base_id": kb,
                 "embedding": [float(x) for x in i.embedding]} for i in items]
        for start in range(0, len(rows), self._batch_size):
            batch = rows[start:start + self._batch_size]
            await self._run("store vectors", lambda b=batch: self._get().upsert(self.collection, b))

    async def delete_by_document(self, document_id: UUID) -> None:
        await self._run("delete a document's vectors", lambda: self._get().delete(
            self.collection, filter=f'document_id == "{UUID(str(document_id))}"'))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        expression = f'document_id == "{UUID(str(document_id))}"'
        if keep:
            expression += " and chunk_id not in [" + ", ".join(f'"{UUID(str(k))}"' for k in keep) + "]"
        await self._run("delete a document's other vectors", lambda: self._get().delete(
            self.collection, filter=expression))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await self._run("delete a knowledge base's vectors", lambda: self._get().delete(
            self.collection, filter=f'knowledge_base_id == "{UUID(str(knowledge_base_id))}"'))

    async def drop(self, name: str | None = None) -> None:
        """Remove the whole collection (an index generation that lost its migration), or ``name``."""
        await self._run("drop a collection", lambda: self._get().drop_collection(name or self.collection))

    async def exists(self) -> bool:
        return bool(await self._run("check a collection", lambda: self._get().has_collection(self.collection)))

    async def list_collections(self) -> list[str]:
        return list(await self._run("list collections", lambda: self._get().list_collections()))

    async def count_by_document(self, document_id: UUID) -> int:
        found = await self._run("count vectors", lambda: self._get().query(
            self.collection, filter=f'document_id == "{UUID(str(document_id))}"', output_fields=["count(*)"],
            consistency_level="Strong"))
        return int(found[0]["count(*)"]) if found else 0

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int, *,
                     document_ids: Sequence[UUID] | None = None) -> list[VectorHit]:
        """``document_ids``: only those documents' vectors (a filter expression inside Milvus's search)."""
        if limit <= 0 or (document_ids is not None and not document_ids):
            return []
        expression = f'knowledge_base_id == "{UUID(str(knowledge_base_id))}"'
        if document_ids is not None:  # UUID() re-formats each id: nothing but hex and dashes reaches the expression
            expression += " and document_id in [" + ", ".join(f'"{UUID(str(d))}"' for d in document_ids) + "]"
        return await self._run("search", self._search, expression, [float(x) for x in vector], int(limit))

    async def similarities(self, knowledge_base_id: UUID, vector: Sequence[float],
                           chunk_ids: Sequence[UUID]) -> list[VectorHit]:
        """The cosine similarity of those chunks' vectors (read by primary key) to ``vector``: what
        the identifier stage of a search scores the chunks it brings with (exact, no index walk)."""
        if not chunk_ids:
            return []
        expression = (f'knowledge_base_id == "{UUID(str(knowledge_base_id))}" and chunk_id in ['
                      + ", ".join(f'"{UUID(str(c))}"' for c in chunk_ids) + "]")
        rows = await self._run("read vectors", self._read, expression)
        return cosine_hits(vector, [(UUID(str(r["chunk_id"])), r["embedding"]) for r in rows])

    def _read(self, expression: str) -> list[dict[str, Any]]:
        client = self._get()
        try:
            return list(client.query(self.collection, filter=expression, output_fields=["chunk_id", "embedding"],
                                     consistency_level=self._consistency))
        except Exception as exc:
            if "not loaded" not in str(exc).lower() and "released" not in str(exc).lower():
                raise
            client.load_collection(self.collection)
            return list(client.query(self.collection, filter=expression, output_fields=["chunk_id", "embedding"],
                                     consistency_level=self._consistency))

    def _search(self, expression: str, vector: list[float], limit: int) -> list[VectorHit]:
        client = self._get()
        kwargs = {"data": [vector], "anns_field": "embedding", "filter": expression,
                  "limit": min(limit, 16384), "output_fields": ["chunk_id"],
                  "search_params": {"metric_type": "COSINE", "params": {"ef": max(64, min(limit * 2, 2048))}},
                  "consistency_level": self._consistency}
        try:
            found = client.search(self.collection, **kwargs)
        except Exception as exc:
            if "not loaded" not in str(exc).lower() and "released" not in str(exc).lower():
                raise
            client.load_collection(self.collection)  # Milvus restarted: collections come back released
            found = client.search(self.collection, **kwargs)
        hits = [VectorHit(chunk_id=UUID(str(h.get("id", h.get("chunk_id")))), score=float(h["distance"]))
                for h in (found[0] if found else [])]
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits

    # operations ------------------------------------------------------------------------------
    async def ping(self) -> bool:
        await self._run("answer", lambda: self._get().has_collection(self.collection))
        return True

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await asyncio.to_thread(client.close)

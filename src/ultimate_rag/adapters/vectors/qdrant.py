"""Qdrant through ``qdrant-client``: a Qdrant server (``ULTIMATE_RAG_QDRANT_URL`` + API key) or the
client's embedded local engine (``ULTIMATE_RAG_QDRANT_PATH``; one process at a time holds its
lock, so that mode suits a single process, tests and small setups, not API + workers).

* One collection per embedding model and dimension, cosine distance.
* Point id = the chunk's UUID (upsert replaces); payload ``knowledge_base_id`` and ``document_id``
  with keyword payload indexes, used by the filtered search, deletes and counts.
* Upserts are sent ``batch_size`` points at a time with ``wait=True``: when the call returns the
  points are applied, so a document committed READY right after is searchable. Search results
  are still only candidates: PostgreSQL's READY filter keeps what is returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any
from uuid import UUID

from ...domain.errors import PermanentError, TransientError
from ...domain.models import EmbeddedChunk, VectorHit
from ..backends import import_backend
from .milvus import collection_name
from .similarity import cosine_hits


def _qdrant() -> ModuleType:
    return import_backend("qdrant_client", "the Qdrant vector store", package="qdrant-client")


class QdrantVectorStore:
    def __init__(self, *, dimension: int, model: str, url: str | None = None, api_key: str | None = None,
                 path: str | None = None, batch_size: int = 256, timeout: float = 30.0,
                 collection_prefix: str = "urag") -> None:
        if not url and not path:
            raise ValueError("the Qdrant vector store needs ULTIMATE_RAG_QDRANT_URL or ULTIMATE_RAG_QDRANT_PATH")
        self.dimension = int(dimension)
        self.collection = collection_name(model, dimension, collection_prefix)
        self._url, self._api_key, self._path = url, api_key, path
        self._batch_size = max(1, batch_size)
        self._timeout = timeout
        self._client: Any = None

    def _get(self) -> Any:
        if self._client is None:
            qdrant_client = _qdrant()
            if self._url:
                self._client = qdrant_client.AsyncQdrantClient(url=self._url, api_key=self._api_key,
                                                               timeout=int(self._timeout))
            else:
                self._client = qdrant_client.AsyncQdrantClient(path=self._path)
        return self._client

    @staticmethod
    def _models() -> Any:
        return _qdrant().models

    def _match(self, key: str, value: UUID) -> Any:
        m = self._models()
        return m.Filter(must=[m.FieldCondition(key=key, match=m.MatchValue(value=str(UUID(str(value)))))])

    async def _run(self, what: str, awaitable: Any) -> Any:
        try:
            return await awaitable
        except (PermanentError, TransientError):
            raise
        except Exception as exc:
            raise TransientError(f"Qdrant could not {what}: {exc}", service="vector index") from exc

    # the port --------------------------------------------------------------------------------
    async def ensure_ready(self) -> None:
        await self._run("prepare its collection", self._ensure_ready())

    async def _ensure_ready(self) -> None:
        client, m = self._get(), self._models()
        if not await client.collection_exists(self.collection):
            try:
                await client.create_collection(
                    self.collection, vectors_config=m.VectorParams(size=self.dimension, distance=m.Distance.COSINE))
            except Exception:
                if not await client.collection_exists(self.collection):
                    raise
        else:
            info = await client.get_collection(self.collection)
            size = getattr(info.config.params.vectors, "size", self.dimension)
            if int(size) != self.dimension:
                raise PermanentError(f"the Qdrant collection {self.collection} holds {size}-dimensional vectors, "
                                     f"not {self.dimension}")
        if not self._url:  # the local engine ignores payload indexes (and says so): a server uses them
            return
        for field in ("knowledge_base_id", "document_id"):
            await client.create_payload_index(self.collection, field_name=field,
                                              field_schema=m.PayloadSchemaType.KEYWORD, wait=True)

    async def drop(self, name: str | None = None) -> None:
        """Remove the whole collection (an index generation that lost its migration), or ``name``."""
        await self._run("drop a collection", self._get().delete_collection(name or self.collection))

    async def exists(self) -> bool:
        return bool(await self._run("check a collection", self._get().collection_exists(self.collection)))

    async def list_collections(self) -> list[str]:
        found = await self._run("list collections", self._get().get_collections())
        return [c.name for c in found.collections]

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        if not items:
            return
        m, kb = self._models(), str(knowledge_base_id)
        points = [m.PointStruct(id=str(i.chunk.id), vector=[float(x) for x in i.embedding],
                                payload={"knowledge_base_id": kb, "document_id": str(i.chunk.document_id)})
                  for i in items]
        for start in range(0, len(points), self._batch_size):
            await self._run("store vectors", self._get().upsert(
                self.collection, points=points[start:start + self._batch_size], wait=True))

    async def delete_by_document(self, document_id: UUID) -> None:
        m = self._models()
        await self._run("delete a document's vectors", self._get().delete(
            self.collection, points_selector=m.FilterSelector(filter=self._match("document_id", document_id)),
            wait=True))

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        m = self._models()
        selector = self._match("document_id", document_id)
        if keep:
            selector = m.Filter(must=selector.must, must_not=[m.HasIdCondition(has_id=[str(k) for k in keep])])
        await self._run("delete a document's other vectors", self._get().delete(
            self.collection, points_selector=m.FilterSelector(filter=selector), wait=True))

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        m = self._models()
        await self._run("delete a knowledge base's vectors", self._get().delete(
            self.collection,
            points_selector=m.FilterSelector(filter=self._match("knowledge_base_id", knowledge_base_id)), wait=True))

    async def count_by_document(self, document_id: UUID) -> int:
        result = await self._run("count vectors", self._get().count(
            self.collection, count_filter=self._match("document_id", document_id), exact=True))
        return int(result.count)

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int, *,
                     document_ids: Sequence[UUID] | None = None) -> list[VectorHit]:
        """``document_ids``: only those documents' vectors (a filter inside Qdrant's query)."""
        if limit <= 0 or (document_ids is not None and not document_ids):
            return []
        m = self._models()
        query_filter = self._match("knowledge_base_id", knowledge_base_id)
        if document_ids is not None:
            query_filter.must.append(m.FieldCondition(
                key="document_id", match=m.MatchAny(any=[str(UUID(str(d))) for d in document_ids])))
        result = await self._run("search", self._get().query_points(
            self.collection, query=[float(x) for x in vector], query_filter=query_filter,
            limit=int(limit), with_payload=False, with_vectors=False,
            # the local engine searches exactly and warns about search params
            search_params=m.SearchParams(hnsw_ef=max(64, min(int(limit) * 2, 2048))) if self._url else None))
        hits = [VectorHit(chunk_id=UUID(str(p.id)), score=float(p.score)) for p in result.points]
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits

    async def similarities(self, knowledge_base_id: UUID, vector: Sequence[float],
                           chunk_ids: Sequence[UUID]) -> list[VectorHit]:
        """The cosine similarity of those chunks' vectors (read by point id) to ``vector``: what the
        identifier stage of a search scores the chunks it brings with (exact, no index walk)."""
        if not chunk_ids:
            return []
        points = await self._run("read vectors", self._get().retrieve(
            self.collection, ids=[str(UUID(str(c))) for c in chunk_ids], with_payload=["knowledge_base_id"],
            with_vectors=True))
        kb = str(knowledge_base_id)
        return cosine_hits(vector, [(UUID(str(p.id)), p.vector) for p in points
                                    if (p.payload or {}).get("knowledge_base_id") == kb])

    # operations ------------------------------------------------------------------------------
    async def ping(self) -> bool:
        await self._run("answer", self._get().collection_exists(self.collection))
        return True

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

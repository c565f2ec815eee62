"""What an idle worker fills in for chunks indexed before a feature existed: their identifier keys
(migration 0021, ``IdentifierBackfill``) and their sparse vectors.

Sparse vectors for chunks indexed before hybrid search existed (migration 0015): an idle worker
computes them from the stored chunk text, a few chunks at a time, with no manual step and without
taking any document out of search (their dense vectors keep serving meanwhile). The chunk's
embedding text is rebuilt as the chunker makes it (heading context, then content), so the
per-knowledge-base embedding cache serves it; the dense vector is read back from the cache to
add the chunk to its language's centroid."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from ..domain.embedding_text import stored_embedding_text
from ..domain.identifiers import chunk_identifiers
from ..domain.ids import text_hash
from ..domain.models import Chunk, EmbeddedChunk, SourceLocator
from ..domain.ports import (
    BackfillStore,
    CentroidStore,
    EmbeddingCacheStore,
    IdentifierBackfillStore,
    IdleBackfill,
    SparseIndexWriter,
)
from ..offload import run_sized
from .embedding.passages import EmbeddingService

log = logging.getLogger(__name__)


class SparseBackfill:
    def __init__(self, *, chunks: BackfillStore, sparse_index: SparseIndexWriter, embedding: EmbeddingService,
                 cache: EmbeddingCacheStore | None, centroids: CentroidStore | None, batch_size: int = 8) -> None:
        self._chunks = chunks
        self._embedding = embedding
        self._cache = cache
        self._centroids = centroids
        self._sparse = sparse_index
        self._batch = batch_size
        self._after = UUID(int=0)
        self.done = embedding.sparse is None  # nothing to backfill without a sparse encoder

    async def step(self) -> int:
        """One batch; returns how many chunks were looked at (0: a full pass found nothing left)."""
        if self.done:
            return 0
        rows = await self._chunks.chunks_without_sparse(self._after, self._batch)
        if not rows:
            if self._after == UUID(int=0):
                self.done = True
            self._after = UUID(int=0)  # start the next pass from the beginning
            return 0
        self._after = rows[-1]["id"]
        by_kb: dict[UUID, list[dict[str, Any]]] = {}
        for row in rows:
            by_kb.setdefault(row["knowledge_base_id"], []).append(row)
        for kb, group in by_kb.items():
            await self._fill(kb, group)
        return len(rows)

    async def _fill(self, kb: UUID, rows: list[dict[str, Any]]) -> None:
        texts = [stored_embedding_text(r["content"], r["heading_path"]) for r in rows]
        sparse = await self._embedding.sparse_passages(texts, knowledge_base_id=kb) or []
        model = self._embedding.embedder.name
        dense = await self._cache.get_many(kb, model, texts) if self._cache else {}
        items = [EmbeddedChunk(chunk=Chunk(id=r["id"], document_id=r["document_id"], knowledge_base_id=kb,
                                           ordinal=r["ordinal"], content=r["content"], token_count=0,
                                           heading_path=tuple(r["heading_path"] or ()), locator=SourceLocator()),
                               embedding=tuple(dense.get(text_hash(t), ())), sparse=s)
                 for r, t, s in zip(rows, texts, sparse, strict=True)]
        await self._sparse.upsert(kb, items)
        if self._centroids is not None:
            with_dense = [i for i in items if len(i.embedding) == self._embedding.embedder.dimension]
            if with_dense:
                await self._centroids.add(kb, model, with_dense)
        log.info("backfilled sparse vectors of %d chunks in knowledge base %s", len(items), kb)


class IdentifierBackfill:
    """Identifier keys (domain/identifiers.py) for chunks written before the identifier index
    (migration 0021): computed from the stored text, a batch at a time by an idle worker. Until a
    chunk has its keys, search finds it by its vectors and tiers it on keys computed from its text
    (identifier_stage.py); only the index lookup misses it."""

    def __init__(self, store: IdentifierBackfillStore, batch_size: int = 200) -> None:
        self._store = store
        self._batch = batch_size
        self.done = False

    async def step(self) -> int:
        """One batch; 0 (and done) when no chunk is left without its keys."""
        if self.done:
            return 0
        rows = await self._store.chunks_without_identifiers(self._batch)
        if not rows:
            self.done = True
            return 0
        keys = await run_sized(sum(len(r["content"]) for r in rows), _keys_of, rows)
        await self._store.set_identifiers(keys)
        log.info("backfilled the identifier keys of %d chunks", len(rows))
        return len(rows)


def _keys_of(rows: list[dict[str, Any]]) -> dict[UUID, list[str]]:
    return {r["id"]: chunk_identifiers(r["content"], r["heading_path"] or ()) for r in rows}


class Backfills:
    """Several idle backfills as one: each step runs the first that is not done."""

    def __init__(self, *parts: IdleBackfill) -> None:
        self.parts = parts

    @property
    def done(self) -> bool:
        return all(p.done for p in self.parts)

    async def step(self) -> int:
        for part in self.parts:
            if not part.done:
                looked = await part.step()
                if looked:
                    return looked
        return 0

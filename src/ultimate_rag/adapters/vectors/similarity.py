"""Cosine similarity of a query to vectors read back from a store (Milvus, Qdrant): the scores of
chunks a search names by id rather than finds by an index walk (the identifier stage)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np

from ...domain.models import VectorHit


def cosine_hits(query: Sequence[float], vectors: Sequence[tuple[UUID, Sequence[float]]]) -> list[VectorHit]:
    """One hit per vector, best first; a zero vector scores 0."""
    if not vectors:
        return []
    q = np.asarray(query, dtype=np.float32)
    m = np.asarray([v for _, v in vectors], dtype=np.float32)
    norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
    scores = np.divide(m @ q, norms, out=np.zeros(len(vectors), dtype=np.float32), where=norms > 0)
    hits = [VectorHit(chunk_id=chunk, score=float(s)) for (chunk, _), s in zip(vectors, scores, strict=True)]
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits

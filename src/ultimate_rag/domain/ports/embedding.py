"""Embedding: the models that turn text into vectors, the per-process engine that batches every
job's texts (its streaming capability is what the embedding service calls), the per-knowledge-base
cache in front of them, and the language centroids the vectors add to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable
from uuid import UUID

from ..models import EmbeddedChunk
from ..search import LanguageOffsets, QueryVectors

SparseVector = dict[int, float]  # a learned sparse vector: index -> weight, L2-normalised


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int
    max_tokens: int

    def count_tokens(self, text: str) -> int: ...
    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...
    async def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class Truncating(Protocol):
    """An embedder that cuts inputs over its token limit (providers reject them) instead of
    failing: the chunks it embeds only the start of are noted as such."""

    max_tokens: int

    def truncate(self, text: str) -> str: ...


class EngineLoad(Protocol):
    """The process's embedding engine, as its callers see it (``adapters/embedders/batch_engine.py``)."""

    busy_seconds: float  # wall time with at least one batch running

    def busy(self) -> bool:
        """Other jobs' texts are queued or running: a new request waits behind them."""
        ...


class StreamingEmbedder(Embedder, Protocol):
    """An embedder behind the process's engine: a document's texts go in at once, batched with
    other jobs' texts, and the vectors stream back batch by batch as ``(positions, vectors)``."""

    @property
    def engine(self) -> EngineLoad: ...
    def busy(self) -> bool: ...
    def stream_documents(self, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[list[float]]]]: ...


class SparseEncoder(Protocol):
    """The learned sparse head, behind the same engine as the dense model."""

    name: str
    dimension: int

    @property
    def engine(self) -> EngineLoad: ...
    def stream_documents(self, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[SparseVector]]]: ...
    async def encode_query(self, text: str) -> SparseVector: ...


DensePair = tuple[list[float], SparseVector]  # a text's dense vector and its learned sparse vector


@runtime_checkable
class PairedDocuments(Protocol):
    """An embedder whose engine gives a document text's dense and sparse vectors from one pass
    (``pairs``), batch by batch: ``(indices into texts, [(dense, sparse), ...])``."""

    pairs: bool

    def stream_pairs(self, texts: Sequence[str]) -> AsyncIterator[tuple[list[int], list[DensePair]]]: ...


@runtime_checkable
class PairedQueries(Protocol):
    """A sparse encoder giving a query's dense vector (of the embedder it ``pairs_with``) with its own."""

    def pairs_with(self, embedder: object) -> bool: ...
    async def encode_query_pair(self, text: str) -> DensePair: ...


class EmbeddingCacheStore(Protocol):
    """Vectors by (knowledge base, model, sha256 of the text); keys are ``ids.text_hash``."""

    async def get_many(self, knowledge_base_id: UUID, model: str, texts: Sequence[str]) -> dict[bytes, list[float]]: ...
    async def put_many(self, knowledge_base_id: UUID, model: str,
                       items: Sequence[tuple[str, Sequence[float]]]) -> None: ...
    async def get_sparse(self, knowledge_base_id: UUID, model: str,
                         texts: Sequence[str]) -> dict[bytes, dict[int, float]]: ...
    async def put_sparse(self, knowledge_base_id: UUID, model: str, dimension: int,
                         items: Sequence[tuple[str, dict[int, float]]]) -> None: ...
    async def evict(self, max_entries: int, batch_size: int = 10_000) -> int:
        """Least recently used entries beyond ``max_entries`` go; returns how many."""
        ...


class CentroidStore(Protocol):
    """Each language's running vector sums per (knowledge base, model): search centres a query's
    similarities on them (domain/search.py ``LanguageOffsets``)."""

    async def add(self, knowledge_base_id: UUID, model: str, items: Sequence[EmbeddedChunk], *,
                  document: tuple[UUID, int], within: object = None) -> None:
        """The published revision ``document`` (id, revision)'s share: recorded and added, once, and
        only while it is the published one (taken out again when it stops being it). ``within``:
        the READY commit's open transaction, when the store can write in it."""
        ...

    async def offsets(self, knowledge_base_id: UUID, model: str, query: QueryVectors, *,
                      min_chunks: int, language: str | None = None) -> LanguageOffsets | None:
        """The query's similarity to each language's mean, less their average; None when fewer
        than two languages count (a minimum share of the chunks; ``min_chunks`` of their own for a
        language without a reference mean). ``language``: the query's (``script_language``), for
        ``LanguageOffsets.centred_query``."""
        ...

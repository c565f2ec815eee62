"""Ports: what the services need from the outside world. Adapters implement these Protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from .chat import ChatMessage, ChatReply, ChatUsage
from .models import Chunk, DocumentSource, EmbeddedChunk, ParsedDocument, VectorHit


@runtime_checkable
class ObjectStorage(Protocol):
    async def put(self, key: str, data: bytes, content_type: str) -> None: ...
    async def get(self, key: str) -> bytes: ...
    async def exists(self, key: str) -> bool: ...
    async def delete(self, key: str) -> None: ...
    async def delete_prefix(self, prefix: str) -> int: ...
    def stream(self, key: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]: ...
    # every key under the prefix with its last modification time: what the orphan sweeper sees
    def list_keys(self, prefix: str = "") -> AsyncIterator[tuple[str, datetime]]: ...


@runtime_checkable
class VectorStore(Protocol):
    """Vectors keyed by chunk id, filterable by knowledge base. Search results are candidates only:
    the search service keeps the chunks of published revisions as PostgreSQL records them (double filter)."""

    dimension: int

    async def ensure_ready(self) -> None: ...
    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None: ...
    async def delete_by_document(self, document_id: UUID) -> None: ...
    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        """The document's vectors other than ``keep`` (its published revision's chunks): what a
        revision swap, a failed rebuild or the janitor removes."""
    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None: ...
    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int) -> list[VectorHit]: ...
    async def count_by_document(self, document_id: UUID) -> int: ...


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int
    max_tokens: int

    def count_tokens(self, text: str) -> int: ...
    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...
    async def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class Parser(Protocol):
    name: str
    version: str

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool: ...
    def parse(self, source: DocumentSource) -> ParsedDocument: ...


class Chunker(Protocol):
    def split(self, parsed: ParsedDocument, *, document_id: UUID, knowledge_base_id: UUID,
              revision: int, chunk_size: int, overlap: int) -> list[Chunk]: ...


class ChunkSnapshotStore(Protocol):
    async def save(self, *, knowledge_base_id: UUID, document_id: UUID, snapshot: dict[str, Any],
                   revision: int | None = None) -> None: ...
    async def publish(self, knowledge_base_id: UUID, document_id: UUID, revision: int) -> None: ...
    async def load(self, knowledge_base_id: UUID, document_id: UUID, revision: int | None = None) -> bytes | None: ...
    async def delete_document(self, knowledge_base_id: UUID, document_id: UUID) -> None: ...
    async def delete_knowledge_base(self, knowledge_base_id: UUID) -> None: ...


@runtime_checkable
class ChatModel(Protocol):
    """An OpenAI-compatible chat completions endpoint. Failures raise ``ProviderError`` (or its
    timeout / rate-limit kinds) after the adapter's own retries; ``stream`` yields text pieces and,
    last, the usage when the provider reports it. Closing the stream early cancels the request."""

    name: str

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> ChatReply: ...
    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> AsyncIterator[str | ChatUsage]: ...

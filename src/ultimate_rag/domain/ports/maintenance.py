"""What keeps the stores tidy off the ingest path: the orphan sweeper's questions to the database,
and the sparse and identifier backfills' reads and writes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from ..lexical import LexicalShare
from ..models import EmbeddedChunk


@dataclass(frozen=True)
class ObjectOwner:
    """A document row as the sweeper sees it, share-locked for the length of the removal."""

    id: UUID
    object_key: str
    status: str
    job_status: str | None
    asset_keys: frozenset[str]


@dataclass(frozen=True)
class Owners:
    """``locked``: documents we hold; ``busy``: documents that exist but are being changed right now.
    An id in neither has no row at all."""

    locked: dict[UUID, ObjectOwner]
    busy: frozenset[UUID]


class MaintenanceStore(Protocol):
    def exclusive(self) -> AbstractAsyncContextManager[bool]:
        """Whether this process holds the sweep lock (one sweeper at a time, across machines)."""
        ...

    def owners(self, document_ids: Sequence[UUID]) -> AbstractAsyncContextManager[Owners]:
        """A transaction that share-locks the documents and yields what they own: remove the
        unowned objects inside it, so no writer can start on these documents meanwhile."""
        ...

    async def document_revisions(self, ids: Iterable[UUID]) -> dict[UUID, tuple[int | None, int]]:
        """Per existing document: (published revision, revision last queued)."""
        ...

    async def existing_knowledge_bases(self, ids: Iterable[UUID]) -> set[UUID]: ...
    async def has_table(self, table: str) -> bool: ...
    async def vector_documents_after(self, table: str, after: UUID, limit: int) -> list[UUID]: ...
    async def remove_orphan_vectors(self, table: str, document_ids: Sequence[UUID]) -> dict[UUID, int]:
        """The vectors that are not chunks of their document's published revision, of documents
        no worker runs; returns the dense vectors removed per document."""
        ...


class GenerationSweeper(Protocol):
    async def sweep_orphans(self) -> list[str]:
        """Drop the index generations no knowledge base serves, builds or is about to drop."""
        ...


class BackfillStore(Protocol):
    async def chunks_without_sparse(self, after: UUID, limit: int) -> list[dict[str, Any]]:
        """The next ``limit`` chunks of READY documents after chunk id ``after`` without a sparse
        vector, in id order."""
        ...

    async def documents_without_shares(self, after: UUID, limit: int, *, language: bool) -> list[dict[str, Any]]:
        """The next ``limit`` documents after id ``after`` whose published revision has no lexical
        share (or, with ``language``, no language share): id, knowledge_base_id, revision, and which
        of the two (``lexical``, ``language``) is missing."""
        ...

    async def published_chunks(self, document_id: UUID, revision: int) -> list[dict[str, Any]]:
        """The document's chunks of that revision, in order."""
        ...


class IdentifierBackfillStore(Protocol):
    async def chunks_without_identifiers(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` chunks whose identifier keys were never computed (written before the
        identifier index existed): id, content, heading_path."""
        ...

    async def set_identifiers(self, keys: dict[UUID, list[str]]) -> None:
        """Each chunk's identifier keys, in one statement (a chunk that has some already keeps them)."""
        ...


class IdleBackfill(Protocol):
    """Work an idle worker does a batch at a time (``step``: how many rows it looked at, 0 when a
    pass found nothing left) until it is ``done``."""

    @property
    def done(self) -> bool: ...
    async def step(self) -> int: ...


class SparseIndexWriter(Protocol):
    """The learned sparse and lexical vectors' writes (one statement) and a published revision's
    lexical share, written and added at once."""

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None: ...
    async def publish_share(self, knowledge_base_id: UUID, share: LexicalShare) -> None: ...

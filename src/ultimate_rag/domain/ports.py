"""Ports: what the services need from the outside world. Adapters implement these Protocols."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable
from uuid import UUID

from .chat import ChatMessage, ChatReply, ChatUsage
from .dedup import Candidate
from .embedding_models import IndexPlan
from .models import (
    Chunk,
    Document,
    DocumentAsset,
    DocumentSource,
    EmbeddedChunk,
    IndexState,
    KnowledgeBase,
    Lease,
    ParsedDocument,
    PipelineDocument,
    ReadyCommit,
    ReadyOutcome,
    StageEntry,
    VectorHit,
)
from .search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from .status import DocumentStatus, JobOperation

L = TypeVar("L")  # a lease: what a claim returns and every later call presents
L_contra = TypeVar("L_contra", contravariant=True)  # a lease, where it is only presented


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
class CandidateSearch(Protocol):
    """A vector store that gives a search its candidates itself: the top ``limit`` by dense and by
    sparse similarity (as ``mode`` needs), the filters applied inside the index, both similarities
    of every candidate, and whether the index has nothing more to give (the search stops
    over-fetching). A store without it answers dense ``search`` alone."""

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None) -> tuple[list[ScoredChunk], bool]: ...


@runtime_checkable
class PlannedCandidateSearch(CandidateSearch, Protocol):
    """Candidates from the index generation a plan names: the search reads the knowledge base's
    plan once, embeds the query with that generation's model and asks that same generation (which
    raises ``GenerationGone`` when a migration's switch dropped it meanwhile)."""

    async def plan(self, knowledge_base_id: UUID) -> IndexPlan: ...
    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None,
                         plan: IndexPlan | None = None) -> tuple[list[ScoredChunk], bool]: ...


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int
    max_tokens: int

    def count_tokens(self, text: str) -> int: ...
    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...
    async def embed_query(self, text: str) -> list[float]: ...


DensePair = tuple[list[float], dict[int, float]]  # a text's dense vector and its learned sparse vector


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


@runtime_checkable
class Parser(Protocol):
    name: str
    version: str

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool: ...
    def parse(self, source: DocumentSource) -> ParsedDocument: ...


class ParserResolver(Protocol):
    """The parser registry, as the services need it."""

    @property
    def parsers(self) -> tuple[Parser, ...]: ...
    def resolve(self, source: DocumentSource) -> Parser: ...
    def mime_type(self, parser: Parser, source: DocumentSource) -> str:
        """The type to store and serve: what the content was detected to be (through the parser it
        resolved to), never what the client said."""


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
    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> AsyncGenerator[str | ChatUsage, None]: ...


@runtime_checkable
class TaskLeases(Protocol[L_contra]):
    """What the leased-task runner (``services/leases.py``) needs from a queue of leased work (a
    document's job, a connector sync): renew the lease (False once it is lost), record a failure
    (the implementation decides retry or end; ``LeaseLostError`` when the lease is gone), and hand
    the work back without burning an attempt."""

    async def heartbeat(self, lease: L_contra) -> bool: ...
    async def fail(self, lease: L_contra, error: BaseException) -> None: ...
    async def release(self, lease: L_contra) -> None: ...


class LeaseKeeping(Protocol[L_contra]):
    """Renews leases on a thread with its own connection (fenced), whatever the event loop does:
    ``start`` before the loop is niced; ``keep`` returns its stop; ``on_lost`` runs on the loop."""

    def start(self) -> None: ...
    def keep(self, lease: L_contra, on_lost: Callable[[], None]) -> Callable[[], None]: ...
    def close(self) -> None: ...


class ClaimingLeases(TaskLeases[L], Protocol[L]):
    """Leases claimed one at a time (``None`` when nothing is due)."""

    async def claim(self, worker_id: str) -> L | None: ...


# -- what the document lifecycle (services/lifecycle.py) calls -----------------------------------------
@dataclass(frozen=True)
class LockedDocument:
    """A document as read under its job's and its own row lock. ``upload_*``: the re-upload holding
    it (its token, and the status and error message to restore if its bytes never commit)."""

    status: DocumentStatus
    knowledge_base_id: UUID
    object_key: str
    content_revision: int
    upload_token: str | None = None
    upload_restore_status: str | None = None
    upload_restore_error: str | None = None


class LifecycleSession(Protocol):
    """One document's job and row, locked (job first), in one transaction: the writes an operation
    makes once the service has decided it. ``document`` follows the writes (its status is current)."""

    document: LockedDocument

    async def queue(self, operation: JobOperation, *, force: bool, new_revision: bool = False) -> None:
        """The single job queued again (PENDING); a delete unpublishes at once, a rebuild
        (``new_revision``) is a new content revision built beside the published one."""
    async def cancel(self, message: str) -> None:
        """Job and document FAILED with ``message``; a worker still on it loses its lease."""
    async def begin_upload(self, token: str) -> None: ...
    async def record_upload(self, *, object_key: str, filename: str, mime_type: str, size_bytes: int,
                            sha256: str, revision: int) -> None: ...
    async def restore_upload(self, status: DocumentStatus, error_message: str | None) -> None: ...


class KnowledgeBaseRemovalStore(Protocol):
    """What removing a whole knowledge base needs from the database (services/knowledge_base_removal.py)."""

    async def mark_deleting(self, knowledge_base_id: UUID) -> None: ...
    async def queue_document_deletes(self, knowledge_base_id: UUID, batch_size: int = 1000) -> int: ...
    async def drop_if_empty(self, knowledge_base_id: UUID, remove_leftovers: Callable[[], Awaitable[None]]) -> bool:
        """Delete the knowledge base row once it owns no document; ``remove_leftovers`` runs
        first, under the row lock."""


class LifecycleStore(Protocol):
    def locked(self, document_id: UUID) -> AbstractAsyncContextManager[LifecycleSession]:
        """``ResourceNotFoundError`` when the document (or its job) does not exist."""
        ...

    async def bulk_queue(self, knowledge_base_id: UUID, *, statuses: frozenset[DocumentStatus],
                         accepted: frozenset[DocumentStatus], current_parsers: list[str] | None,
                         batch_size: int = 1000) -> tuple[int, int]:
        """Queue (a rebuild) every document of the knowledge base in ``statuses`` and ``accepted``,
        whose parser is not current; returns (queued, skipped: not ``accepted``)."""
        ...

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None: ...


class DocumentReader(Protocol):
    async def get(self, document_id: UUID) -> Document: ...
    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]: ...


# -- what the core services call (small on purpose: unit tests pass in-memory fakes) -----------------
class KnowledgeBaseReader(Protocol):
    async def get(self, knowledge_base_id: UUID) -> KnowledgeBase: ...


class DocumentIntake(Protocol):
    """Creates a document and its queued job in one transaction (the submit's commit), with the
    upload's audit entry when ``uploaded_by`` (an API key's prefix) is given."""

    async def create_with_job(self, *, document_id: UUID, knowledge_base_id: UUID, filename: str, mime_type: str,
                              size_bytes: int, sha256: str, object_key: str, max_attempts: int,
                              source: dict[str, Any] | None = None, uploaded_by: str | None = None) -> Document: ...


class DedupSession(Protocol):
    """Deduplication's reads and writes inside one fenced transaction, under the knowledge base's
    deduplication lock; ``current`` is the judged document's status, read under its row lock."""

    current: DocumentStatus

    async def candidates(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                         bands: list[tuple[int, int]] | None, exempt: list[UUID],
                         hashvalues: list[int] | None = None, record_if_none: bool = False,
                         enter: StageEntry | None = None) -> list[Candidate]:
        """The documents it may duplicate; ``record_if_none``: when there is none, its judgement
        (hash, ``hashvalues``, bands, an empty verdict) is recorded too, in the same write, and
        the document enters ``enter`` with it (the caller checked that ``current`` may move there)."""
        ...

    async def record_judgement(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                               hashvalues: list[int] | None, bands: list[tuple[int, int]] | None,
                               verdict: dict[str, Any]) -> None:
        """The document's hash, signature and bands (replacing any earlier run's) and its verdict."""
        ...

    async def record_content_hash(self, document_id: UUID, text_hash: str) -> None: ...
    async def outdate(self, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool: ...


class DedupStore(Protocol):
    def judging(self, lease: Lease, knowledge_base_id: UUID) -> AbstractAsyncContextManager[DedupSession]:
        """A fenced transaction (``LeaseLostError`` when the job is no longer ours)."""
        ...



# -- the job pipeline: the lease (the queue) and the pipeline's fenced writes (its repository) -------
class JobLeasesPort(Protocol):
    """The job queue as the worker uses it: claim leases in queue order (``idle``: this worker runs
    nothing, so it may take a suspect), renew one (False once lost), end an attempt (retry later
    or FAILED; ``cleanup`` runs while the job row is still locked), hand one back without burning
    an attempt, and wait until work is announced."""

    async def claim(self, worker_id: str, limit: int = 1, *, idle: bool = True) -> list[Lease]: ...
    async def heartbeat(self, lease: Lease) -> bool: ...
    async def fail(self, lease: Lease, *, error: str, will_retry: bool, delay_seconds: float,
                   document_message: str, cleanup: Callable[[], Awaitable[None]] | None = None) -> None: ...
    async def release(self, lease: Lease) -> None: ...
    async def wait_for_work(self, timeout: float, stop: asyncio.Event) -> None: ...


class PipelineStore(Protocol):
    """The pipeline's reads and its fenced writes. Every write first checks that the job is still
    this lease's (``LeaseLostError``, before anything is written, when it is not) and that the
    document may move to the status written (the transition table)."""

    async def load_document(self, document_id: UUID) -> PipelineDocument | None: ...
    async def enter_stage(self, lease: Lease, status: DocumentStatus,
                          progress: dict[str, Any] | None = None) -> None: ...
    async def report_progress(self, lease: Lease, progress: dict[str, Any]) -> None: ...
    async def start_parsing(self, lease: Lease, parser_name: str, parser_version: str) -> None:
        """Enter PARSING with the parser about to run recorded, and no warnings yet (a failed
        parse leaves none behind): one write."""
        ...

    async def record_warnings(self, lease: Lease, warnings: Sequence[str]) -> None: ...
    async def replace_assets(self, lease: Lease, assets: Sequence[DocumentAsset], revision: int) -> list[str]:
        """The revision's asset rows; returns the object keys no longer referenced."""
        ...

    async def commit_ready(self, lease: Lease, commit: ReadyCommit, *,
                           write_vectors: Callable[[], Awaitable[None]],
                           finish: Callable[[object, IndexState | None], Awaitable[None]]) -> ReadyOutcome:
        """INDEXING -> READY in one transaction. ``write_vectors`` runs before the chunk rows;
        ``finish``, the last step before the commit, gets that open transaction (an opaque handle:
        a store in the same database may write in it, any other ignores it) and the knowledge
        base's index state as the transaction read it (None: not read; raising rolls it all back)."""
        ...

    async def complete_already_ready(self, lease: Lease) -> None: ...
    async def commit_deleted(self, lease: Lease, *, hard: bool,
                             remove_outside: Callable[[Sequence[str]], Awaitable[None]]) -> None:
        """DELETING -> DELETED (or the row gone); ``remove_outside`` gets the asset object keys."""
        ...

    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]: ...


class ParseRunnerPort(Protocol):
    """Runs a parser (isolated in a child process, or in a thread), reporting pages done."""

    async def parse(self, parser: Parser, source: DocumentSource,
                    on_progress: Callable[[int, int], Awaitable[None]] | None = None) -> ParsedDocument: ...


class IndexPlanView(Protocol):
    """Where a knowledge base's vectors go now: its current index generation and, while an
    embedding-model migration runs, the one being built (``adapters/vectors/generations.py``).
    A generation is opaque here: it is written to, compared, and its ``spec`` names the model."""

    @property
    def knowledge_base_id(self) -> UUID: ...
    @property
    def current(self) -> Any: ...
    @property
    def target(self) -> Any | None: ...
    @property
    def migration_id(self) -> int | None: ...
    @property
    def generations(self) -> list[Any]: ...


class IndexGenerationsPort(Protocol):
    """The vector index generations the pipeline writes (each generation's vectors, embedded with
    its own model)."""

    async def plan(self, kb_id: UUID, /) -> IndexPlanView: ...
    def plan_from(self, kb_id: UUID, state: IndexState, /) -> IndexPlanView:
        """``plan`` from the knowledge base's index state read already."""
        ...
    async def write(self, kb_id: UUID, items_by_generation: Sequence[tuple[Any, Sequence[EmbeddedChunk]]],
                    /) -> None: ...
    async def remove_superseded(self, kb_id: UUID, document_id: UUID, keep: Sequence[UUID],
                                generations: Sequence[Any], /) -> None:
        """The document's vectors in each of ``generations`` but those of ``keep``."""
        ...

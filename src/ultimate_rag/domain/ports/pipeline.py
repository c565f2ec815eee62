"""The job pipeline's database side: the leased-task runner's queue, the job queue as the worker
uses it, the pipeline's fenced writes (the READY commit among them) and deduplication's judging.
Every write is fenced by a lease: ``LeaseLostError`` before anything is written when the job is no
longer this worker's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar, runtime_checkable
from uuid import UUID

from ..dedup import Candidate
from ..models import DocumentAsset, IndexState, Lease, PipelineDocument, ReadyCommit, ReadyOutcome, StageEntry
from ..status import DocumentStatus

L = TypeVar("L")  # a lease: what a claim returns and every later call presents
L_contra = TypeVar("L_contra", contravariant=True)  # a lease, where it is only presented


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


class JobLeases(Protocol):
    """The job queue as the worker uses it: claim leases in queue order (``idle``: this worker runs
    nothing, so it may take a suspect), renew one (False once lost), end an attempt (retry later
    or FAILED; ``cleanup`` runs while the job row is still locked), hand one back without burning
    an attempt, and wait until work is announced."""

    async def claim(self, worker_id: str, limit: int = 1, *, idle: bool = True) -> list[Lease]: ...
    async def heartbeat(self, lease: Lease) -> bool: ...
    async def fail(self, lease: Lease, *, error: str, will_retry: bool, delay_seconds: float,
                   document_message: str, cleanup: Callable[[], Awaitable[None]] | None = None,
                   given_back: bool = False) -> None: ...
    async def release(self, lease: Lease) -> None: ...
    async def wait_for_work(self, timeout: float, stop: asyncio.Event) -> None: ...


class ProgressReports(Protocol):
    async def report_progress(self, lease: Lease, progress: dict[str, Any]) -> None:
        """The running stage's progress (fenced: ``LeaseLostError`` once the job is not ours)."""
        ...


class PipelineStore(ProgressReports, Protocol):
    """The pipeline's reads and its fenced writes. Every write first checks that the job is still
    this lease's (``LeaseLostError``, before anything is written, when it is not) and that the
    document may move to the status written (the transition table)."""

    async def load_document(self, document_id: UUID) -> PipelineDocument | None: ...
    async def enter_stage(self, lease: Lease, status: DocumentStatus,
                          progress: dict[str, Any] | None = None) -> None: ...
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

"""In-memory stand-ins for the job pipeline's database ports (``JobLeases``, ``PipelineStore``,
``DedupStore``), for fast unit tests of processing, deduplication and the worker without
PostgreSQL. They keep the two rules the real queue and repository enforce: every write is fenced
(a lease that is no longer the job's raises ``LeaseLostError`` and writes nothing) and every status
change follows the domain's transition table. The real ones are exercised by
``tests/integration/test_queue*.py``, ``test_pipeline*.py`` and ``test_dedup*.py``."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from ultimate_rag.domain.dedup import Candidate
from ultimate_rag.domain.errors import LeaseLostError
from ultimate_rag.domain.models import (
    Chunk,
    DocumentAsset,
    IndexState,
    KnowledgeBaseSettings,
    Lease,
    PipelineDocument,
    ReadyCommit,
    ReadyOutcome,
    StageEntry,
)
from ultimate_rag.domain.status import (
    ALLOWED_TRANSITIONS,
    DEDUP_MATCHABLE,
    DocumentStatus,
    JobOperation,
    JobStatus,
    check_transition,
    job_sources_of,
)

D = DocumentStatus


@dataclass
class Row:
    """A document row and its job row, as the fakes keep them."""

    id: UUID
    knowledge_base_id: UUID
    filename: str
    object_key: str
    created_at: datetime
    kb_settings: KnowledgeBaseSettings
    status: DocumentStatus = D.PENDING
    content_revision: int = 1
    published_revision: int | None = None
    chunks: tuple[Chunk, ...] = ()  # the committed chunk rows
    assets: list[DocumentAsset] = field(default_factory=list)
    error_message: str | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    parser: tuple[str, str] | None = None
    warnings: list[str] = field(default_factory=list)
    content_hash: str | None = None
    minhash: list[int] | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    duplicate_of: UUID | None = None
    # the job
    job_id: UUID = field(default_factory=uuid4)
    job_status: JobStatus = JobStatus.PENDING
    attempts: int = 0
    max_attempts: int = 3
    locked_by: str | None = None
    last_error: str | None = None
    retry_in: float | None = None  # the backoff of the last retry (not due again in these tests)


@dataclass
class World:
    rows: dict[UUID, Row] = field(default_factory=dict)
    stages: list[tuple[DocumentStatus, int]] = field(default_factory=list)  # (status entered, chunk rows then)
    commits: list[ReadyCommit] = field(default_factory=list)
    dedup_locks: int = 0  # deduplication locks taken (judging, and a READY commit that outdates a twin)
    holding_job: UUID | None = None  # the job row a READY commit holds while the vectors are written

    def add(self, kb: UUID, filename: str, object_key: str, *, created_at: datetime | None = None,
            settings: KnowledgeBaseSettings | None = None) -> Row:
        row = Row(uuid4(), kb, filename, object_key, created_at or datetime.now(UTC),
                  settings or KnowledgeBaseSettings(dedup_mode="off"))
        self.rows[row.id] = row
        return row

    def owned(self, lease: Lease) -> Row:
        """The fencing: the job is still RUNNING under this worker and attempt, else nothing is written."""
        row = self.rows.get(lease.document_id)
        if row is None or row.job_id != lease.job_id:
            raise LeaseLostError("the document no longer exists")
        if (row.job_status, row.locked_by, row.attempts) != (JobStatus.RUNNING, lease.worker_id, lease.attempt):
            raise LeaseLostError()
        return row

    def steal(self, document_id: UUID) -> None:
        """Another worker reclaimed the job (this worker's lease expired)."""
        row = self.rows[document_id]
        row.locked_by, row.attempts = "another-worker", row.attempts + 1

    def move(self, row: Row, target: DocumentStatus) -> None:
        row.status = check_transition(row.status, target)

    def outdate(self, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
        row = self.rows.get(older)
        if row is None or (row.status, D.OUTDATED) not in ALLOWED_TRANSITIONS:
            return False
        if row.job_status in job_sources_of(JobStatus.SUCCEEDED):
            row.job_status, row.locked_by = JobStatus.SUCCEEDED, None
        row.status, row.duplicate_of, row.verdict = D.OUTDATED, newer, verdict
        row.chunks, row.published_revision, row.minhash = (), None, None
        return True

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing, like the real commit: a failure inside restores the rows."""
        saved = copy.deepcopy(self.rows)
        try:
            yield
        except BaseException:
            self.rows = saved
            raise


class MemoryLeases:
    """``ports.JobLeases`` over the world's job rows."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def claim(self, worker_id: str, limit: int = 1, *, idle: bool = True) -> list[Lease]:
        due = [r for r in self.world.rows.values()
               if r.job_status == JobStatus.PENDING and r.retry_in is None and r.attempts < r.max_attempts][:limit]
        for row in due:
            row.job_status, row.locked_by, row.attempts = JobStatus.RUNNING, worker_id, row.attempts + 1
        return [Lease(job_id=r.job_id, document_id=r.id, worker_id=worker_id, attempt=r.attempts,
                      max_attempts=r.max_attempts, operation=JobOperation.INGEST) for r in due]

    async def heartbeat(self, lease: Lease) -> bool:
        try:
            self.world.owned(lease)
        except LeaseLostError:
            return False
        return True

    async def fail(self, lease: Lease, *, error: str, will_retry: bool, delay_seconds: float,
                   document_message: str, cleanup: Callable[[], Awaitable[None]] | None = None,
                   given_back: bool = False) -> None:
        row = self.world.owned(lease)
        row.max_attempts += 1 if given_back else 0
        if cleanup is not None:
            await cleanup()
        target = D.PENDING if will_retry else D.FAILED
        if row.status != target:
            self.world.move(row, target)
        row.job_status = JobStatus.PENDING if will_retry else JobStatus.FAILED
        row.locked_by, row.last_error, row.error_message = None, error, document_message
        row.retry_in = delay_seconds if will_retry else None

    async def release(self, lease: Lease) -> None:
        row = self.world.owned(lease)
        if row.status != D.PENDING:
            self.world.move(row, D.PENDING)
        row.job_status, row.locked_by, row.attempts = JobStatus.PENDING, None, row.attempts - 1

    async def wait_for_work(self, timeout: float, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout)


class MemoryPipeline:
    """``ports.PipelineStore`` over the world's rows; ``vectors`` loses an outdated twin's vectors."""

    def __init__(self, world: World, vectors: Any) -> None:
        self.world = world
        self.vectors = vectors

    async def load_document(self, document_id: UUID) -> PipelineDocument | None:
        r = self.world.rows.get(document_id)
        if r is None:
            return None
        return PipelineDocument(id=r.id, knowledge_base_id=r.knowledge_base_id, filename=r.filename,
                                mime_type="text/plain", object_key=r.object_key, sha256="0" * 64, status=r.status,
                                content_revision=r.content_revision, created_at=r.created_at, kb_settings=r.kb_settings)

    async def enter_stage(self, lease: Lease, status: DocumentStatus, progress: dict[str, Any] | None = None) -> None:
        row = self.world.owned(lease)
        self.world.move(row, status)
        row.progress, row.error_message = dict(progress or {}), None
        self.world.stages.append((status, len(row.chunks)))

    async def report_progress(self, lease: Lease, progress: dict[str, Any]) -> None:
        self.world.owned(lease).progress = dict(progress)

    async def start_parsing(self, lease: Lease, parser_name: str, parser_version: str) -> None:
        await self.enter_stage(lease, DocumentStatus.PARSING)
        row = self.world.owned(lease)
        row.parser, row.warnings = (parser_name, parser_version), []

    async def record_warnings(self, lease: Lease, warnings: Sequence[str]) -> None:
        self.world.owned(lease).warnings = list(warnings)

    async def replace_assets(self, lease: Lease, assets: Sequence[DocumentAsset], revision: int) -> list[str]:
        row = self.world.owned(lease)
        old = {a.object_key for a in row.assets} - {a.object_key for a in assets}
        row.assets = list(assets)
        return sorted(old)

    async def commit_ready(self, lease: Lease, commit: ReadyCommit, *,
                           write_vectors: Callable[[], Awaitable[None]],
                           finish: Callable[[object, IndexState | None], Awaitable[None]]) -> ReadyOutcome:
        world = self.world
        if commit.outdate is not None:
            world.dedup_locks += 1
        row = world.owned(lease)
        check_transition(row.status, D.READY)
        with world.transaction():
            world.holding_job = lease.job_id
            try:
                await write_vectors()
            finally:
                world.holding_job = None
            twin = commit.outdate
            if twin is not None and world.outdate(twin.document_id, lease.document_id, twin.verdict):
                await self.vectors.delete_by_document(twin.document_id)
            row = world.rows[lease.document_id]
            row.chunks, row.published_revision = commit.chunks, commit.revision
            stale = tuple(a.object_key for a in row.assets if a.id not in commit.assets)
            row.assets = [a for a in row.assets if a.id in commit.assets]
            world.move(row, D.READY)
            row.job_status, row.locked_by = JobStatus.SUCCEEDED, None
            await finish(None, None)
        world.commits.append(commit)
        return ReadyOutcome(stale, {"READY": "now"})

    async def complete_already_ready(self, lease: Lease) -> None:
        row = self.world.owned(lease)
        if row.status != D.READY:
            raise LeaseLostError(f"document is {row.status}, not READY")
        row.job_status, row.locked_by = JobStatus.SUCCEEDED, None

    async def commit_deleted(self, lease: Lease, *, hard: bool,
                             remove_outside: Callable[[Sequence[str]], Awaitable[None]]) -> None:
        row = self.world.owned(lease)
        check_transition(row.status, D.DELETED)
        await remove_outside([a.object_key for a in row.assets])
        if hard:
            del self.world.rows[row.id]
            return
        row.status, row.chunks, row.assets, row.job_status = D.DELETED, (), [], JobStatus.SUCCEEDED

    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]:
        row = self.world.rows[document_id]
        return [c.id for c in row.chunks] if row.published_revision is not None else []


class RecordsUnique:
    """A dedup session's ``candidates``, as the real one: with ``record_if_none``, a document that
    has no candidate gets its judgement recorded (``record_judgement`` with an empty verdict), and
    enters the stage it is handed (``_enter``). Sessions give ``_candidates``, ``record_judgement``
    and ``_enter``."""

    def _enter(self, document_id: UUID, entry: StageEntry) -> None:
        raise NotImplementedError

    def _candidates(self, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                    exempt: list[UUID]) -> list[Candidate]:
        raise NotImplementedError

    async def record_judgement(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                               hashvalues: list[int] | None, bands: list[tuple[int, int]] | None,
                               verdict: dict[str, Any]) -> None:
        raise NotImplementedError

    async def candidates(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                         bands: list[tuple[int, int]] | None, exempt: list[UUID],
                         hashvalues: list[int] | None = None, record_if_none: bool = False,
                         enter: StageEntry | None = None) -> list[Candidate]:
        found = self._candidates(knowledge_base_id, document_id, text_hash, exempt)
        if record_if_none and not found:
            await self.record_judgement(knowledge_base_id=knowledge_base_id, document_id=document_id,
                                        text_hash=text_hash, hashvalues=hashvalues, bands=bands, verdict={})
            if enter is not None:
                self._enter(document_id, enter)
        return found


@dataclass
class MemoryDedupSession(RecordsUnique):
    world: World
    current: DocumentStatus

    def _candidates(self, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                    exempt: list[UUID]) -> list[Candidate]:
        return [Candidate(r.id, r.filename, r.content_hash, r.minhash, r.created_at, {})
                for r in self.world.rows.values()
                if r.knowledge_base_id == knowledge_base_id and r.id != document_id and r.id not in exempt
                and r.content_hash == text_hash and (r.status in DEDUP_MATCHABLE or r.published_revision)]

    async def record_judgement(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                               hashvalues: list[int] | None, bands: list[tuple[int, int]] | None,
                               verdict: dict[str, Any]) -> None:
        row = self.world.rows[document_id]
        row.content_hash, row.minhash = text_hash, hashvalues
        row.verdict = verdict

    async def record_content_hash(self, document_id: UUID, text_hash: str) -> None:
        self.world.rows[document_id].content_hash = text_hash

    def _enter(self, document_id: UUID, entry: StageEntry) -> None:  # as PipelineStore.enter_stage
        row = self.world.rows[document_id]
        self.world.move(row, entry.status)
        row.progress, row.error_message = dict(entry.progress), None
        self.world.stages.append((entry.status, len(row.chunks)))


    async def outdate(self, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
        return self.world.outdate(older, newer, verdict)


class MemoryDedupStore:
    """``ports.DedupStore``: judging is fenced like the real one (under the knowledge base's lock)."""

    def __init__(self, world: World) -> None:
        self.world = world

    @asynccontextmanager
    async def judging(self, lease: Lease, knowledge_base_id: UUID) -> AsyncIterator[MemoryDedupSession]:
        self.world.dedup_locks += 1
        row = self.world.owned(lease)
        with self.world.transaction():
            yield MemoryDedupSession(self.world, row.status)

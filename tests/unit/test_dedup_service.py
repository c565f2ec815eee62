"""The deduplication service over in-memory fakes of its ports (``DedupStore``, ``VectorStore``):
fast checks of the verdicts and of what is written, beside the real-database tests in
``tests/integration/test_dedup*.py`` (which exercise the PostgreSQL store and its locks). The
newer twin's READY commit, which outdates the older one, is the pipeline store's
(``tests/unit/test_processing_fakes.py``, ``tests/integration/test_dedup.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from ultimate_rag.domain.dedup import Candidate
from ultimate_rag.domain.models import (
    Block,
    KnowledgeBaseSettings,
    Lease,
    OlderTwin,
    ParsedDocument,
    PipelineDocument,
    StageEntry,
)
from ultimate_rag.domain.status import DocumentStatus
from ultimate_rag.services.dedup import Deduplicator

from .pipeline_fakes import RecordsUnique

D = DocumentStatus
KB = uuid4()
TEXT = "The harbour ferry leaves every twenty minutes from pier four, weather permitting, all year long."


@dataclass
class Doc:
    id: UUID
    status: DocumentStatus
    created_at: datetime
    filename: str = "a.md"
    content_hash: str | None = None
    minhash: list[int] | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    duplicate_of: UUID | None = None


@dataclass
class MemorySession(RecordsUnique):
    store: MemoryDedupStore
    current: DocumentStatus

    def _candidates(self, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                    exempt: list[UUID]) -> list[Candidate]:
        return [Candidate(d.id, d.filename, d.content_hash, d.minhash, d.created_at, {})
                for d in self.store.docs.values()
                if d.id != document_id and d.content_hash == text_hash and d.id not in exempt
                and d.status in (D.READY, D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING)]

    async def record_judgement(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                               hashvalues: list[int] | None, bands: list[tuple[int, int]] | None,
                               verdict: dict[str, Any]) -> None:
        doc = self.store.docs[document_id]
        doc.content_hash, doc.minhash = text_hash, hashvalues
        doc.verdict = verdict

    async def record_content_hash(self, document_id: UUID, text_hash: str) -> None:
        self.store.docs[document_id].content_hash = text_hash

    def _enter(self, document_id: UUID, entry: StageEntry) -> None:
        self.store.docs[document_id].status = entry.status


    async def outdate(self, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
        return await self.store.outdate(None, older=older, newer=newer, verdict=verdict)


@dataclass
class MemoryDedupStore:
    docs: dict[UUID, Doc] = field(default_factory=dict)
    kb_locks: int = 0

    @asynccontextmanager
    async def judging(self, lease: Lease, knowledge_base_id: UUID) -> AsyncIterator[MemorySession]:
        self.kb_locks += 1
        yield MemorySession(self, self.docs[lease.document_id].status)

    async def outdate(self, conn: Any, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
        doc = self.docs[older]
        if doc.status not in (D.READY, D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING):
            return False
        doc.status, doc.duplicate_of, doc.verdict = D.OUTDATED, newer, verdict
        return True


@dataclass
class MemoryVectors:
    deleted: list[UUID] = field(default_factory=list)

    async def delete_by_document(self, document_id: UUID) -> None:
        self.deleted.append(document_id)


def parsed(text: str) -> ParsedDocument:
    return ParsedDocument(blocks=(Block("paragraph", text),))


def setup(*docs: Doc) -> tuple[Deduplicator, MemoryDedupStore, MemoryVectors]:
    store, vectors = MemoryDedupStore({d.id: d for d in docs}), MemoryVectors()
    return Deduplicator(store, vectors, min_chars=20), store, vectors  # type: ignore[arg-type]  # vectors: delete_by_document only


def row(doc: Doc, settings: KnowledgeBaseSettings | None = None) -> PipelineDocument:
    return PipelineDocument(id=doc.id, knowledge_base_id=KB, filename=doc.filename, mime_type="text/markdown",
                            object_key=f"{KB}/{doc.id}/source.md", sha256="0" * 64, status=doc.status,
                            content_revision=1, created_at=doc.created_at,
                            kb_settings=settings or KnowledgeBaseSettings())


def lease(doc: Doc) -> Lease:
    return Lease(job_id=uuid4(), document_id=doc.id, worker_id="w", attempt=1, max_attempts=3)


async def test_a_unique_document_records_its_signature_and_no_verdict() -> None:
    doc = Doc(uuid4(), D.PARSING, datetime.now(UTC))
    dedup, store, vectors = setup(doc)
    decision = await dedup.judge(lease(doc), row(doc, KnowledgeBaseSettings(dedup_mode="exact")), parsed(TEXT))
    assert decision.outdate is None and not decision.outdated_self
    assert doc.content_hash and doc.verdict == {} and store.kb_locks == 1 and vectors.deleted == []


async def test_a_unique_document_enters_the_next_stage_with_its_verdict_and_a_twin_does_not() -> None:
    """The pipeline hands the judging its EMBEDDING entry: a unique document enters it in the
    verdict's write (``Decision.entered``); a twin, or a document that may not move there, does not
    (the pipeline's own fenced entry runs, and says why when it is refused)."""
    now = datetime.now(UTC)
    entry = StageEntry(D.EMBEDDING, {"stage": "EMBEDDING", "done": 0, "total": 3})
    unique = Doc(uuid4(), D.CHUNKING, now)
    dedup, _, _ = setup(unique)
    decision = await dedup.judge(lease(unique), row(unique), parsed(TEXT), entry)
    assert decision.entered and unique.status == D.EMBEDDING and unique.verdict == {}

    older, newer = Doc(uuid4(), D.READY, now - timedelta(hours=1)), Doc(uuid4(), D.CHUNKING, now)
    dedup, _, _ = setup(older, newer)
    await dedup.judge(lease(older), row(older), parsed(TEXT))  # its hash, first
    decision = await dedup.judge(lease(newer), row(newer), parsed(TEXT), entry)
    assert decision.outdate is not None and not decision.entered and newer.status == D.CHUNKING

    stale = Doc(uuid4(), D.PENDING, now)  # a document the pipeline may not move to EMBEDDING from here
    dedup, _, _ = setup(stale)
    decision = await dedup.judge(lease(stale), row(stale), parsed(TEXT), entry)
    assert not decision.entered and stale.status == D.PENDING and stale.verdict == {}


async def test_the_newer_twin_outdates_the_older_at_its_ready_commit() -> None:
    now = datetime.now(UTC)
    older, newer = Doc(uuid4(), D.READY, now - timedelta(hours=1)), Doc(uuid4(), D.PARSING, now)
    dedup, _, vectors = setup(older, newer)
    await dedup.judge(lease(older), row(older), parsed(TEXT))  # its hash, first
    older.status = D.READY
    decision = await dedup.judge(lease(newer), row(newer), parsed(TEXT))
    assert older.status == D.READY and vectors.deleted == []  # nothing changes before READY
    # the READY commit gets the older twin as data, with the verdict its document will record
    assert decision.outdate == OlderTwin(older.id, KB, {**(decision.verdict or {}),
                                                        "compared_document_id": str(newer.id), "role": "older"})
    assert newer.verdict["role"] == "newer" and newer.verdict["compared_document_id"] == str(older.id)


async def test_the_older_twin_judged_last_is_outdated_at_once() -> None:
    now = datetime.now(UTC)
    newer, older = Doc(uuid4(), D.READY, now), Doc(uuid4(), D.PARSING, now - timedelta(hours=1))
    dedup, _, vectors = setup(newer, older)
    await dedup.judge(lease(newer), row(newer), parsed(TEXT))
    decision = await dedup.judge(lease(older), row(older), parsed(TEXT))
    assert decision.outdated_self and older.status == D.OUTDATED and older.duplicate_of == newer.id
    assert vectors.deleted == [older.id]


async def test_too_little_text_is_never_compared_and_off_does_nothing() -> None:
    doc = Doc(uuid4(), D.PARSING, datetime.now(UTC))
    dedup, store, _ = setup(doc)
    await dedup.judge(lease(doc), row(doc), parsed("Test"))
    assert doc.content_hash is None and "too little text" in doc.verdict["skipped"]
    locks = store.kb_locks
    assert (await dedup.judge(lease(doc), row(doc, KnowledgeBaseSettings(dedup_mode="off")), parsed(TEXT))) \
        .verdict is None
    assert store.kb_locks == locks  # off: not even the lock

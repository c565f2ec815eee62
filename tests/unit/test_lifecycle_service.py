"""The document lifecycle's decisions (services/lifecycle.py) over in-memory fakes of its ports: which
operations each status accepts (the table of domain/operations.py, nothing else), what an accepted
one queues, and that a refused one changes nothing. The fake store keeps the real store's contract:
a locked document's writes commit together when the operation's block ends, or not at all, and each
status write is checked against the transition table. The PostgreSQL store is covered by the
integration tests (tests/integration/test_lifecycle.py, test_upload_lease.py, test_statuses.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID, uuid4

import pytest

from ultimate_rag.domain.errors import ConflictError, ResourceNotFoundError
from ultimate_rag.domain.models import Document
from ultimate_rag.domain.operations import DocumentOperation as Op
from ultimate_rag.domain.operations import allows, statuses_allowing
from ultimate_rag.domain.ports import LockedDocument
from ultimate_rag.domain.status import DocumentStatus, JobOperation, JobStatus, check_transition
from ultimate_rag.services.lifecycle import CANCELLED, BulkReindexFilter, DocumentLifecycle

D = DocumentStatus
KB = uuid4()


@dataclass
class Row:
    status: DocumentStatus
    object_key: str = "kb/doc/source.txt"
    content_revision: int = 1
    error_message: str | None = None
    upload: dict[str, str | None] | None = None
    queued: list[tuple[JobOperation, bool, bool]] = field(default_factory=list)  # (operation, force, new revision)
    cancelled: list[str] = field(default_factory=list)
    job_status: JobStatus | None = None  # None: PENDING when the document is, else SUCCEEDED


class MemorySession:
    def __init__(self, row: Row) -> None:
        self.row = row
        self.document = self._view()

    def _view(self) -> LockedDocument:
        upload = self.row.upload or {}
        last = self.row.queued[-1] if self.row.queued else (JobOperation.INGEST, False, False)
        job = self.row.job_status or (JobStatus.PENDING if self.row.status == D.PENDING else JobStatus.SUCCEEDED)
        return LockedDocument(self.row.status, KB, self.row.object_key, self.row.content_revision,
                              upload_token=upload.get("token"), upload_restore_status=upload.get("status"),
                              upload_restore_error=upload.get("error_message"), job_status=job,
                              job_operation=last[0], job_force=last[1])

    def _move(self, target: DocumentStatus) -> None:
        self.row.status = check_transition(self.row.status, target)
        self.document = self._view()

    async def queue(self, operation: JobOperation, *, force: bool, new_revision: bool = False) -> None:
        self._move(D.PENDING)
        self.row.queued.append((operation, force, new_revision))

    async def cancel(self, message: str) -> None:
        self._move(D.FAILED)
        self.row.cancelled.append(message)
        self.row.error_message, self.row.upload = message, None

    async def begin_upload(self, token: str) -> None:
        previous, error = self.row.status, self.row.error_message
        self._move(D.UPLOADING)
        self.row.upload = {"token": token, "status": previous.value, "error_message": error}
        self.row.error_message = None
        self.document = self._view()

    async def record_upload(self, *, object_key: str, filename: str, mime_type: str, size_bytes: int,
                            sha256: str, revision: int) -> None:
        self.row.object_key, self.row.content_revision, self.row.upload = object_key, revision, None
        self.document = self._view()

    async def restore_upload(self, status: DocumentStatus, error_message: str | None) -> None:
        self._move(status)
        self.row.error_message, self.row.upload = error_message, None
        self.document = self._view()


@dataclass
class MemoryStore:
    rows: dict[UUID, Row] = field(default_factory=dict)
    bulk: list[dict[str, Any]] = field(default_factory=list)

    @asynccontextmanager
    async def locked(self, document_id: UUID) -> AsyncIterator[MemorySession]:
        if document_id not in self.rows:
            raise ResourceNotFoundError("document not found")
        session = MemorySession(deepcopy(self.rows[document_id]))
        yield session
        self.rows[document_id] = session.row  # reached only when the block ended without an error: the commit

    async def bulk_queue(self, knowledge_base_id: UUID, *, statuses: frozenset[DocumentStatus],
                         accepted: frozenset[DocumentStatus], current_parsers: list[str] | None,
                         batch_size: int = 1000) -> tuple[int, int]:
        self.bulk.append({"statuses": statuses, "accepted": accepted, "parsers": current_parsers})
        return 0, 0

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None:
        return None


@dataclass
class MemoryDocuments:
    store: MemoryStore
    published: list[UUID] = field(default_factory=lambda: [uuid4()])

    async def get(self, document_id: UUID) -> Document:
        row = self.store.rows[document_id]
        now = datetime.now(UTC)
        return Document(id=document_id, knowledge_base_id=KB, filename="a.txt", mime_type="text/plain", size_bytes=1,
                        sha256="", object_key=row.object_key, status=row.status, error_message=row.error_message,
                        progress={}, parser_name=None, parser_version=None, chunk_count=0,
                        content_revision=row.content_revision, source={}, duplicate_of=None, stage_timings={},
                        created_at=now, updated_at=now)

    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]:
        return self.published


@dataclass
class MemoryStorage:
    objects: dict[str, bytes] = field(default_factory=dict)
    fail_put: bool = False

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        if self.fail_put:
            raise OSError("storage unavailable")
        self.objects[key] = data

    async def delete(self, key: str) -> None:
        self.objects.pop(key, None)


@dataclass
class MemoryVectors:
    kept: list[tuple[UUID, list[UUID]]] = field(default_factory=list)

    async def delete_document_except(self, document_id: UUID, keep: list[UUID]) -> None:
        self.kept.append((document_id, list(keep)))


@dataclass(frozen=True)
class TextParser:
    name: str = "text"
    version: str = "1"


class Parsers:
    parsers = (TextParser(), TextParser("pdf", "2"))

    def resolve(self, source: Any) -> TextParser:
        return self.parsers[0]

    def mime_type(self, parser: Any, source: Any) -> str:
        return "text/plain"


@dataclass
class World:
    store: MemoryStore = field(default_factory=MemoryStore)
    storage: MemoryStorage = field(default_factory=MemoryStorage)
    vectors: MemoryVectors = field(default_factory=MemoryVectors)

    def __post_init__(self) -> None:
        self.documents = MemoryDocuments(self.store)
        self.lifecycle = DocumentLifecycle(repository=self.store, documents=self.documents,
                                           storage=cast(Any, self.storage), vectors=cast(Any, self.vectors),
                                           parsers=cast(Any, Parsers()), max_upload_bytes=100, max_filename_length=50)

    def add(self, status: DocumentStatus, **fields: Any) -> UUID:
        document_id = uuid4()
        self.store.rows[document_id] = Row(status, **fields)
        self.storage.objects[self.store.rows[document_id].object_key] = b"old"
        return document_id


async def attempt(world: World, document_id: UUID, op: Op) -> None:
    lc = world.lifecycle
    if op is Op.REINDEX:
        await lc.reindex(document_id)
    elif op in (Op.DELETE, Op.HARD_DELETE):
        await lc.delete(document_id, hard=op is Op.HARD_DELETE)
    elif op is Op.FAIL:
        await lc.fail(document_id)
    elif op is Op.RECOVER:
        await lc.recover(document_id)
    else:
        await lc.replace_content(document_id, "new.txt", "text/plain", b"new text")


# what an accepted operation leaves: the document's status, and what its job was queued as
EXPECTED: dict[Op, tuple[DocumentStatus, list[tuple[JobOperation, bool, bool]]]] = {
    Op.REINDEX: (D.PENDING, [(JobOperation.INGEST, False, True)]),  # a rebuild: a new revision
    Op.DELETE: (D.PENDING, [(JobOperation.DELETE, False, False)]),
    Op.HARD_DELETE: (D.PENDING, [(JobOperation.DELETE, True, False)]),
    Op.FAIL: (D.FAILED, []),
    Op.RECOVER: (D.PENDING, [(JobOperation.INGEST, True, True)]),  # failed, then a forced rebuild
    Op.UPLOAD: (D.PENDING, [(JobOperation.INGEST, False, False)]),  # the new bytes are the new revision
}


@pytest.mark.parametrize("op", list(Op))
@pytest.mark.parametrize("status", list(DocumentStatus))
async def test_each_status_accepts_exactly_the_operations_of_the_table(status: DocumentStatus, op: Op) -> None:
    world = World()
    doc = world.add(status, error_message="before")
    before = deepcopy(world.store.rows[doc])
    if not allows(status, op):
        with pytest.raises(ConflictError):
            await attempt(world, doc, op)
        assert world.store.rows[doc] == before and world.vectors.kept == []  # a refusal changes nothing
        assert world.storage.objects == {before.object_key: b"old"}
        return
    await attempt(world, doc, op)
    row = world.store.rows[doc]
    assert (row.status, row.queued) == EXPECTED[op]
    assert row.cancelled == ([CANCELLED] if op in (Op.FAIL, Op.RECOVER) else [])
    # a cancelled run leaves only the published revision's vectors
    assert world.vectors.kept == ([(doc, world.documents.published)] if op in (Op.FAIL, Op.RECOVER) else [])


async def test_deleting_a_queued_document_replaces_what_was_queued() -> None:
    """A PENDING document (not started, or waiting for a retry) is deleted without a 409: the delete
    takes the place of its queued ingest. A hard delete may follow a soft one; a repeat is refused."""
    world = World()
    doc = world.add(D.PENDING)
    await world.lifecycle.delete(doc, hard=False)
    assert world.store.rows[doc].queued == [(JobOperation.DELETE, False, False)]
    with pytest.raises(ConflictError, match="already queued for deletion"):
        await world.lifecycle.delete(doc, hard=False)
    await world.lifecycle.delete(doc, hard=True)
    with pytest.raises(ConflictError, match="already queued for deletion"):
        await world.lifecycle.delete(doc, hard=False)  # never back from hard to soft
    assert world.store.rows[doc].queued == [(JobOperation.DELETE, False, False), (JobOperation.DELETE, True, False)]


async def test_a_queued_document_a_worker_just_took_is_not_deleted_under_it() -> None:
    world = World()
    doc = world.add(D.PENDING)
    world.store.rows[doc].job_status = JobStatus.RUNNING  # claimed; the document enters PARSING next
    with pytest.raises(ConflictError, match="picked up by a worker"):
        await world.lifecycle.delete(doc, hard=True)
    assert world.store.rows[doc].queued == []


async def test_a_reupload_records_the_new_revision_and_removes_the_previous_source() -> None:
    world = World()
    doc = world.add(D.READY, content_revision=3)
    old_key = world.store.rows[doc].object_key
    await world.lifecycle.replace_content(doc, "new.txt", "text/plain", b"new text")
    row = world.store.rows[doc]
    assert row.content_revision == 4 and row.object_key.endswith("/source.r4.txt") and row.upload is None
    assert world.storage.objects == {row.object_key: b"new text"} and old_key not in world.storage.objects


async def test_a_reupload_whose_bytes_are_not_stored_restores_the_document() -> None:
    world = World()
    doc = world.add(D.FAILED, error_message="parse error")
    world.storage.fail_put = True
    with pytest.raises(OSError):
        await world.lifecycle.replace_content(doc, "new.txt", "text/plain", b"new text")
    row = world.store.rows[doc]
    assert (row.status, row.error_message, row.content_revision, row.upload, row.queued) == (
        D.FAILED, "parse error", 1, None, [])


async def test_an_upload_cancelled_meanwhile_neither_commits_nor_restores() -> None:
    world = World()
    doc = world.add(D.READY)
    _, token = await world.lifecycle.begin_upload(doc)
    await world.lifecycle.fail(doc)  # an operator fails the UPLOADING document
    with pytest.raises(ConflictError, match="re-upload was cancelled"):
        await world.lifecycle.finish_upload(doc, token, object_key="x", filename="x", mime_type="text/plain",
                                            size_bytes=1, sha256="0", revision=2)
    assert await world.lifecycle.abort_upload(doc, token) is None
    assert world.store.rows[doc].status == D.FAILED and world.store.rows[doc].error_message == CANCELLED


async def test_an_aborted_upload_of_a_status_it_may_not_return_to_fails_the_document() -> None:
    world = World()
    doc = world.add(D.UPLOADING, upload={"token": "t", "status": "PARSING", "error_message": None})
    assert await world.lifecycle.abort_upload(doc, UUID(int=1)) is None  # another upload's token
    world.store.rows[doc].upload = {"token": str(UUID(int=1)), "status": "PARSING", "error_message": None}
    assert await world.lifecycle.abort_upload(doc, UUID(int=1)) == D.FAILED


@pytest.mark.parametrize(("which", "statuses", "parsers"), [
    (BulkReindexFilter.ALL, {D.READY, D.FAILED, D.OUTDATED}, None),
    (BulkReindexFilter.FAILED, {D.FAILED}, None),
    (BulkReindexFilter.OUTDATED_PARSER, {D.READY, D.FAILED, D.OUTDATED}, ["text:1", "pdf:2"]),
])
async def test_a_bulk_reindex_queues_what_its_filter_picks_among_what_a_reindex_accepts(
        which: BulkReindexFilter, statuses: set[DocumentStatus], parsers: list[str] | None) -> None:
    world = World()
    await world.lifecycle.bulk_reindex(KB, which)
    assert world.store.bulk == [{"statuses": statuses, "accepted": statuses_allowing(Op.REINDEX),
                                 "parsers": parsers}]
    assert not statuses - statuses_allowing(Op.REINDEX)  # the filter asks for nothing a reindex refuses


async def test_an_unknown_document_is_not_found() -> None:
    with pytest.raises(ResourceNotFoundError):
        await World().lifecycle.reindex(uuid4())


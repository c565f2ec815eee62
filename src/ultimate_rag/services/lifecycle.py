"""Document lifecycle operations (SPEC §6): reindex, delete, fail, recover, re-upload, bulk reindex.
Each decision is taken here, from domain/operations.py (the one table of which operation each status
accepts, also served at ``GET /api/statuses``), on the document as read under its row locks
(``LifecycleStore.locked``), and written in that same transaction. Input is validated before
anything changes; the side effects that must follow a commit come after it."""

from __future__ import annotations

import hashlib
import logging
from enum import StrEnum
from typing import Any
from uuid import UUID, uuid4

from ..domain.errors import ConflictError, FileTooLargeError
from ..domain.ids import source_object_key
from ..domain.models import Document, DocumentSource
from ..domain.operations import DocumentOperation as Op
from ..domain.operations import require, statuses_allowing
from ..domain.ports import (
    DocumentReader,
    LifecycleStore,
    LockedDocument,
    ObjectStorage,
    ParserResolver,
    VectorStore,
)
from ..domain.status import RESTORABLE_FROM_UPLOAD, DocumentStatus, JobOperation, JobStatus
from .ingestion import safe_filename

log = logging.getLogger(__name__)
CANCELLED = "cancelled by operator"


class BulkReindexFilter(StrEnum):
    ALL = "all"  # every READY, FAILED and OUTDATED document (DELETED ones stay deleted)
    FAILED = "failed"
    OUTDATED_PARSER = "outdated_parser"  # parsed by another version than the current parser's


D = DocumentStatus
BULK_REINDEX_STATUSES: dict[BulkReindexFilter, frozenset[DocumentStatus]] = {
    BulkReindexFilter.ALL: frozenset({D.READY, D.FAILED, D.OUTDATED}),
    BulkReindexFilter.FAILED: frozenset({D.FAILED}),
    BulkReindexFilter.OUTDATED_PARSER: frozenset({D.READY, D.FAILED, D.OUTDATED}),
}


class DocumentLifecycle:
    def __init__(self, *, repository: LifecycleStore, documents: DocumentReader, storage: ObjectStorage,
                 vectors: VectorStore, parsers: ParserResolver, max_upload_bytes: int,
                 max_filename_length: int) -> None:
        self._repo = repository
        self._documents = documents
        self._storage = storage
        self._vectors = vectors
        self._parsers = parsers
        self._max_upload_bytes = max_upload_bytes
        self._max_filename_length = max_filename_length

    async def reindex(self, document_id: UUID) -> Document:
        async with self._repo.locked(document_id) as doc:
            require(doc.document.status, Op.REINDEX)
            await doc.queue(JobOperation.INGEST, force=False, new_revision=True)
        return await self._documents.get(document_id)

    async def delete(self, document_id: UUID, *, hard: bool) -> Document:
        """Queue the delete; on a queued document (PENDING: not started, or waiting for a retry) the
        delete replaces what was queued, and a hard delete queued before stays hard. The claim takes
        deletes before ingest work, so it runs at once, not behind the backlog."""
        async with self._repo.locked(document_id) as doc:
            current = doc.document
            require(current.status, Op.HARD_DELETE if hard else Op.DELETE)
            if current.status == D.PENDING:
                if current.job_status != JobStatus.PENDING:  # claimed a moment ago: it starts now
                    raise ConflictError("document is being picked up by a worker, try again later")
                if current.job_operation == JobOperation.DELETE and (current.job_force or not hard):
                    raise ConflictError("document is already queued for deletion")  # a hard one may follow a soft one
            await doc.queue(JobOperation.DELETE, force=hard)
        return await self._documents.get(document_id)

    async def fail(self, document_id: UUID) -> tuple[Document, DocumentStatus]:
        """Returns the document and the status it was failed from (read under the row lock)."""
        return await self._cancel(document_id, Op.FAIL)

    async def recover(self, document_id: UUID) -> tuple[Document, DocumentStatus]:
        """Fail, then a forced reindex in the same transaction."""
        return await self._cancel(document_id, Op.RECOVER)

    async def _cancel(self, document_id: UUID, operation: Op) -> tuple[Document, DocumentStatus]:
        """End the job and fail the document; a worker still on it loses its lease (fencing)."""
        async with self._repo.locked(document_id) as doc:
            previous = doc.document.status
            require(previous, operation)
            await doc.cancel(CANCELLED)
            if operation is Op.RECOVER:
                await doc.queue(JobOperation.INGEST, force=True, new_revision=True)
        await self._drop_vectors(document_id)
        return await self._documents.get(document_id), previous

    async def replace_content(self, document_id: UUID, filename: str | None, content_type: str | None,
                              content: bytes) -> Document:
        """Re-upload: validated like an upload before anything changes; the previous source object is
        removed only once the new one is recorded."""
        name = safe_filename(filename, self._max_filename_length)
        if len(content) > self._max_upload_bytes:
            raise FileTooLargeError(f"the file is larger than the limit of {self._max_upload_bytes} bytes")
        source = DocumentSource(document_id, name, content_type or "application/octet-stream", content)
        parser = self._parsers.resolve(source)
        locked, token = await self.begin_upload(document_id)
        revision = locked.content_revision + 1
        key = source_object_key(locked.knowledge_base_id, document_id, source.extension, revision)
        mime = self._parsers.mime_type(parser, source)
        try:
            await self._storage.put(key, content, mime)
            await self.finish_upload(document_id, token, object_key=key, filename=name, mime_type=mime,
                                     size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest(),
                                     revision=revision)
        except BaseException as exc:
            await self._compensate(document_id, token, key, exc)
            raise
        if locked.object_key != key:
            await self._storage.delete(locked.object_key)
        return await self._documents.get(document_id)

    async def begin_upload(self, document_id: UUID) -> tuple[LockedDocument, UUID]:
        """Re-upload, step 1: a stable document becomes UPLOADING while its new bytes are stored,
        under a lease (the store's upload lease: its expiry, this upload's token, and the status and
        error message to restore). Returns the document as it was, and the token."""
        token = uuid4()
        async with self._repo.locked(document_id) as doc:
            before = doc.document
            require(before.status, Op.UPLOAD)
            await doc.begin_upload(str(token))
        return before, token

    async def finish_upload(self, document_id: UUID, token: UUID, *, object_key: str, filename: str,
                            mime_type: str, size_bytes: int, sha256: str, revision: int) -> None:
        """Re-upload, step 2: record the new source and queue it (UPLOADING -> PENDING), only while
        this upload still holds the document (not failed by an operator, nor expired and restored)."""
        async with self._repo.locked(document_id) as doc:
            if not _holds_upload(doc.document, token):
                raise ConflictError(f"the re-upload was cancelled (document is {doc.document.status})")
            await doc.record_upload(object_key=object_key, filename=filename, mime_type=mime_type,
                                    size_bytes=size_bytes, sha256=sha256, revision=revision)
            await doc.queue(JobOperation.INGEST, force=False)

    async def abort_upload(self, document_id: UUID, token: UUID) -> DocumentStatus | None:
        """Compensation for a re-upload whose bytes were never recorded: the document goes back to
        the status (and error message) it had, with its previous revision, which was never touched.
        Returns the restored status, or None when this upload no longer holds the document."""
        async with self._repo.locked(document_id) as doc:
            if not _holds_upload(doc.document, token):
                return None
            previous = DocumentStatus(doc.document.upload_restore_status or D.FAILED)
            if previous not in RESTORABLE_FROM_UPLOAD:
                previous = D.FAILED
            await doc.restore_upload(previous, doc.document.upload_restore_error)
            return previous

    async def _compensate(self, document_id: UUID, token: UUID, key: str, exc: BaseException) -> None:
        """The new bytes were not recorded: put the document back at once (status, error message,
        previous revision), then remove them. The object goes only once the database says the
        document does not use it (a commit whose answer was lost may have landed); if the database
        is gone, the upload lease expires and a worker's claim restores the document (queue.sql),
        and the janitor removes the object if nothing owns it."""
        log.warning("re-upload of %s failed (%s: %s); restoring the document", document_id,
                    exc.__class__.__name__, exc)
        try:
            restored = await self.abort_upload(document_id, token)
            unused = restored is not None or (await self._documents.get(document_id)).object_key != key
        except Exception:
            log.exception("could not restore %s after a failed re-upload; its upload lease will expire",
                          document_id)
            return
        if restored is not None:
            log.info("document %s restored to %s after a failed re-upload", document_id, restored)
        if unused:
            try:
                await self._storage.delete(key)
            except Exception:
                log.exception("could not remove the object %s of a failed re-upload; the janitor will", key)

    async def bulk_reindex(self, knowledge_base_id: UUID, which: BulkReindexFilter,
                           batch_size: int = 1000) -> tuple[int, int]:
        """Every document the filter picks that a reindex accepts is queued (a rolling rebuild);
        returns (queued, skipped because a reindex refuses their status now)."""
        parsers = None
        if which == BulkReindexFilter.OUTDATED_PARSER:
            parsers = [f"{p.name}:{p.version}" for p in self._parsers.parsers]
        return await self._repo.bulk_queue(knowledge_base_id, statuses=BULK_REINDEX_STATUSES[which],
                                           accepted=statuses_allowing(Op.REINDEX), current_parsers=parsers,
                                           batch_size=batch_size)

    async def _drop_vectors(self, document_id: UUID) -> None:
        """A cancelled run leaves no vectors but those of the published revision, which keeps serving."""
        try:
            keep = await self._documents.published_chunk_ids(document_id)
            await self._vectors.delete_document_except(document_id, keep)
        except Exception:
            log.exception("could not remove the unpublished vectors of %s; search never serves them", document_id)

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None:
        return await self._repo.rebuild_progress(knowledge_base_id)


def _holds_upload(document: LockedDocument, token: UUID) -> bool:
    return document.status == D.UPLOADING and document.upload_token == str(token)

"""Document lifecycle operations (SPEC §6): reindex, delete, fail, recover, re-upload, bulk reindex.
The decisions are taken under row locks in the repository; this layer validates input before
anything changes and does the side effects that must follow a commit."""

from __future__ import annotations

import hashlib
import logging
from enum import StrEnum
from typing import Any
from uuid import UUID

from ..adapters.postgres.documents import DocumentRepository
from ..adapters.postgres.lifecycle import LifecycleRepository
from ..domain.errors import FileTooLargeError
from ..domain.ids import source_object_key
from ..domain.models import Document, DocumentSource
from ..domain.ports import ObjectStorage, ParserResolver, VectorStore
from ..domain.status import DocumentStatus
from .ingestion import mime_for, safe_filename

log = logging.getLogger(__name__)


class BulkReindexFilter(StrEnum):
    ALL = "all"  # every READY, FAILED and OUTDATED document (DELETED ones stay deleted)
    FAILED = "failed"
    OUTDATED_PARSER = "outdated_parser"  # parsed by another version than the current parser's


class DocumentLifecycle:
    def __init__(self, *, repository: LifecycleRepository, documents: DocumentRepository, storage: ObjectStorage,
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
        await self._repo.reindex(document_id)
        return await self._documents.get(document_id)

    async def delete(self, document_id: UUID, *, hard: bool) -> Document:
        await self._repo.delete(document_id, hard=hard)
        return await self._documents.get(document_id)

    async def fail(self, document_id: UUID) -> tuple[Document, DocumentStatus]:
        """Returns the document and the status it was failed from (read under the row lock)."""
        previous = await self._repo.fail(document_id)
        await self._drop_vectors(document_id)
        return await self._documents.get(document_id), previous

    async def recover(self, document_id: UUID) -> tuple[Document, DocumentStatus]:
        previous = await self._repo.fail(document_id, then_reindex=True)
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
        locked, token = await self._repo.begin_upload(document_id)
        revision = locked.content_revision + 1
        key = source_object_key(locked.knowledge_base_id, document_id, source.extension, revision)
        mime = mime_for(parser, source)
        try:
            await self._storage.put(key, content, mime)
            await self._repo.finish_upload(document_id, token, object_key=key, filename=name, mime_type=mime,
                                           size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest(),
                                           revision=revision)
        except BaseException as exc:
            await self._compensate(document_id, token, key, exc)
            raise
        if locked.object_key != key:
            await self._storage.delete(locked.object_key)
        return await self._documents.get(document_id)

    async def _compensate(self, document_id: UUID, token: UUID, key: str, exc: BaseException) -> None:
        """The new bytes were not recorded: put the document back at once (status, error message,
        previous revision), then remove them. The object goes only once the database says the
        document does not use it (a commit whose answer was lost may have landed); if the database
        is gone, the upload lease expires and a worker's claim restores the document (queue.sql),
        and the janitor removes the object if nothing owns it."""
        log.warning("re-upload of %s failed (%s: %s); restoring the document", document_id,
                    exc.__class__.__name__, exc)
        try:
            restored = await self._repo.abort_upload(document_id, token)
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

    async def bulk_reindex(self, knowledge_base_id: UUID, which: BulkReindexFilter) -> tuple[int, int]:
        statuses = ["FAILED"] if which == BulkReindexFilter.FAILED else ["READY", "FAILED", "OUTDATED"]
        parsers = None
        if which == BulkReindexFilter.OUTDATED_PARSER:
            parsers = [f"{p.name}:{p.version}" for p in self._parsers.parsers]
        return await self._repo.bulk_reindex(knowledge_base_id, statuses=statuses, current_parsers=parsers)

    async def _drop_vectors(self, document_id: UUID) -> None:
        """A cancelled run leaves no vectors but those of the published revision, which keeps serving."""
        try:
            keep = await self._documents.published_chunk_ids(document_id)
            await self._vectors.delete_document_except(document_id, keep)
        except Exception:
            log.exception("could not remove the unpublished vectors of %s; search never serves them", document_id)

    async def rebuild_progress(self, knowledge_base_id: UUID) -> dict[str, Any] | None:
        return await self._repo.rebuild_progress(knowledge_base_id)

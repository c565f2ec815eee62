"""One connector sync (SPEC §9): discover the remote items, then for each one create or find its
document and bring it up to date, and soft-delete the documents whose item disappeared.

Per item:

* **new** item: its document is created ``FETCHING``, the bytes are downloaded (through
  the outbound client for URLs), a parser is resolved *before* anything is stored (unsupported ->
  ``FAILED`` with the reason), the bytes are stored under the usual system key, and the document
  moves to ``PENDING`` with its single job in one transaction — or to ``FAILED`` with the reason.
* **known** item: a conditional fetch (ETag / Last-Modified / the version stamp discovery saw);
  unchanged (304, same stamp, or the same sha256) -> nothing is reprocessed. Changed -> the
  re-upload path: ``UPLOADING`` (while its new bytes are stored), then ``PENDING``; its previous
  source object is removed afterwards. While it downloads the document keeps its stable status
  (a READY document stays searchable with the old content); a failed download leaves it as it was
  and is counted and reported in the sync's errors.
* an **active** document (queued, running, being deleted or uploaded by someone) is left alone and
  counted as ``skipped_active``: never raced.

Every write is fenced on the sync's lease; a lost lease stops the sync at once (and an object
stored meanwhile is removed). A sync resumed after a crash skips what its previous attempt
already handled (the documents carry the sync's id) and picks up the documents it left in intake.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from ...domain.connectors import Connector, ItemState, KnowledgeBaseDeletingError, SyncLease
from ...domain.errors import ConflictError, LeaseLostError, PermanentError, UltimateRagError
from ...domain.ids import source_object_key
from ...domain.metadata import MAX_BYTES, S3_METADATA, SOURCE, clean, fitted, source_fields
from ...domain.models import DocumentSource
from ...domain.ports import ConnectorStore, ConnectorSyncs, ObjectStorage, ParserResolver
from ...domain.redact import redact_text
from ...domain.status import DocumentStatus, is_active
from ..failures import reason_for
from ..ingestion import safe_filename
from .base import ConnectorConfigError, Fetched, Known, RemoteItem, Source, with_extension

log = logging.getLogger(__name__)
_INTAKE = (DocumentStatus.FETCHING, DocumentStatus.UPLOADING)


class SyncService:
    def __init__(self, *, queue: ConnectorSyncs, connectors: ConnectorStore, storage: ObjectStorage,
                 parsers: ParserResolver, source_for: Callable[[Connector], Source], max_filename_length: int,
                 max_attempts: int) -> None:
        self._queue = queue
        self._connectors = connectors
        self._storage = storage
        self._parsers = parsers
        self._source_for = source_for
        self._max_filename_length = max_filename_length
        self._max_attempts = max_attempts

    async def run(self, lease: SyncLease) -> None:
        """Run the sync to its end (SUCCEEDED). Raises LeaseLostError when the sync stopped being
        ours (aborted, reclaimed, deleted), and anything that fails the sync as a whole (the
        source cannot be listed) for the caller to retry or fail."""
        connector = await self._connectors.load(lease.connector_id)
        if connector is None:
            raise LeaseLostError("the connector was deleted")
        try:
            source = self._source_for(connector)
        except ConnectorConfigError as exc:  # e.g. a directory root removed from the settings since
            raise PermanentError(f"the connector's configuration is no longer valid: {exc.message}") from exc
        items = await source.discover()
        await self._queue.set_count(lease, "discovered", len(items))
        for item in items:
            await self._item(lease, source, item)
        await self._remove_missing(lease, [i.external_id for i in items])
        await self._queue.complete(lease)

    async def _item(self, lease: SyncLease, source: Source, item: RemoteItem) -> None:
        try:
            outcome, error = await self._sync_item(lease, source, item)
        except (LeaseLostError, PermanentError) as exc:
            if isinstance(exc, LeaseLostError) or isinstance(exc.__cause__, KnowledgeBaseDeletingError):
                raise
            outcome, error = "failed", reason_for(exc)
        except Exception as exc:  # one item never fails the sync
            log.warning("connector item %s failed: %s", item.external_id, exc)
            outcome, error = "failed", reason_for(exc)
        if outcome is not None:
            await self._queue.record(lease, outcome, item.external_id, error)

    async def _sync_item(self, lease: SyncLease, source: Source,
                         item: RemoteItem) -> tuple[str | None, str | None]:
        state = await self._queue.find_item(lease, item.external_id)
        ours = state is not None and state.connector_sync_id == lease.sync_id
        if state is not None and ours and state.status not in _INTAKE:
            return None, None  # handled by an earlier attempt of this sync (a resumed sync)
        if state is not None and is_active(state.status) and not ours:
            return "skipped_active", None
        known = None
        if state is not None and not ours and state.status != DocumentStatus.DELETED and state.sha256:
            known = Known(state.remote_etag, state.remote_last_modified)
        name = self._filename(item.name)
        if state is None:
            try:
                doc_id = await self._queue.start_new_item(lease, item.external_id, name, self._max_attempts)
            except KnowledgeBaseDeletingError as exc:
                raise PermanentError("the knowledge base is being deleted; the sync stops") from exc
            except ConflictError as exc:
                return "skipped_active", str(exc)
            state = await self._queue.find_item_by_id(doc_id)
            assert state is not None
            new = True
        else:
            new = state.status == DocumentStatus.FETCHING
        try:
            fetched = await source.fetch(item, known)
            return await self._store(lease, item, state, fetched, new)
        except LeaseLostError:
            raise
        except Exception as exc:
            # a document this sync holds in intake (new, or moved to UPLOADING before the failure)
            # becomes FAILED with the reason; a stable one is left as it was (fail_item checks)
            reason = reason_for(exc)
            await self._queue.fail_item(lease, state.id, reason)
            return "failed", reason

    async def _store(self, lease: SyncLease, item: RemoteItem, state: ItemState, fetched: Fetched,
                     new: bool) -> tuple[str | None, str | None]:
        in_intake = state.status in _INTAKE
        if fetched.content is None:
            await self._queue.mark_seen(lease, state.id, etag=fetched.etag, last_modified=fetched.last_modified)
            return "unchanged", None
        content = fetched.content
        sha = hashlib.sha256(content).hexdigest()
        if not in_intake and sha == state.sha256:
            if state.status == DocumentStatus.DELETED:  # the item came back as it was: restore it
                await self._queue.queue_document(lease, state.id, operation="ingest", max_attempts=self._max_attempts)
                return "updated", None
            await self._queue.mark_seen(lease, state.id, etag=fetched.etag, last_modified=fetched.last_modified)
            return "unchanged", None
        name = self._filename(with_extension(fetched.name or item.name, fetched.content_type))
        source = DocumentSource(state.id, name, fetched.content_type or "application/octet-stream", content)
        parser = self._parsers.resolve(source)  # unsupported -> FAILED with the reason, nothing stored
        if not in_intake:
            try:
                state = await self._queue.begin_refetch(lease, state.id)
            except ConflictError:
                return "skipped_active", None
        revision = 1 if new else state.content_revision + 1
        key = source_object_key(lease.knowledge_base_id, state.id, source.extension, revision)
        mime = self._parsers.mime_type(parser, source)
        await self._storage.put(key, content, mime)
        try:
            await self._queue.finish_item(
                lease, state.id, object_key=key, filename=name, mime_type=mime,
                size_bytes=len(content), sha256=sha, revision=revision, etag=fetched.etag,
                last_modified=fetched.last_modified, max_attempts=self._max_attempts,
                fields=fetched_fields(item, fetched), path=item.path)
        except BaseException:
            await self._forget(key)
            raise
        if state.object_key and state.object_key != key:
            await self._forget(state.object_key)
        return ("new" if new else "updated"), None

    async def _remove_missing(self, lease: SyncLease, seen: list[str]) -> None:
        """Documents whose remote item disappeared are soft-deleted through the normal delete job."""
        for row in await self._queue.items_not_in(lease, seen):
            if row["connector_sync_id"] == lease.sync_id and row["status"] not in _INTAKE:
                continue  # queued for removal by an earlier attempt of this sync
            try:
                await self._queue.queue_document(lease, row["id"], operation="delete", max_attempts=self._max_attempts)
            except ConflictError:
                await self._queue.record(lease, "skipped_active", row["external_id"])
                continue
            await self._queue.record(lease, "removed", row["external_id"])

    def _filename(self, name: str) -> str:
        try:
            return safe_filename(name, self._max_filename_length)
        except UltimateRagError:
            return "document"

    async def _forget(self, key: str) -> None:
        try:
            await self._storage.delete(key)
        except Exception:
            log.exception("could not remove object %s; the janitor will", key)


def fetched_fields(item: RemoteItem, fetched: Fetched) -> dict[str, Any]:
    """The metadata's fetched keys of an item: ``source`` (its path and folders in a folder or
    bucket, or its URL without credentials) and ``s3`` (the object's user metadata), cleaned to fit the limits."""
    url = redact_text(item.external_id) or ""  # never the credentials a URL may carry
    fields: dict[str, Any] = {SOURCE: source_fields(item.path) if item.path else {"url": url[:2048]}}
    if fetched.metadata:
        fields[S3_METADATA] = clean(fetched.metadata)
    return fitted(fields, MAX_BYTES // 2)

"""One document: read it, its chunks, snapshot, source and assets; reindex it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import Annotated
from urllib.parse import quote
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from ...domain.errors import ResourceNotFoundError
from ...domain.media import RASTER_IMAGE_TYPES
from ...domain.ports import ObjectStorage
from ..audit import AuditDep
from ..deps import (
    DocumentsDep,
    EditableDocument,
    LifecycleDep,
    ReadableDocument,
    SettingsDep,
    SnapshotsDep,
    StorageDep,
    principal,
)
from ..schemas import ERROR_RESPONSES, ChunkList, ChunkOut, DocumentOut, DocumentPatchIn, body_of
from ..uploads import CONTENT_BODY, UploadedFile

router = APIRouter(prefix="/api/documents", tags=["documents"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


@router.get("/{document_id}", response_model=DocumentOut)
async def get_document(doc: ReadableDocument, documents: DocumentsDep) -> DocumentOut:
    return DocumentOut.of(doc, await documents.job_history(doc.id))


@router.patch("/{document_id}", response_model=DocumentOut)
async def update_document(doc: EditableDocument, body: DocumentPatchIn, documents: DocumentsDep,
                          audit: AuditDep) -> DocumentOut:
    """Change the document's own fields (``metadata``, a JSON Merge Patch: a key set to null goes).
    Nothing is rebuilt: the published revision keeps serving, and search filters see the new
    values at once. The reserved keys (doc, front_matter, s3, source) are the product's: 422."""
    updated = await documents.update_metadata(doc.id, body.metadata)
    await audit.record("document.metadata", knowledge_base_id=doc.knowledge_base_id, document_id=doc.id,
                       keys=sorted(body.metadata)[:64])
    return DocumentOut.of(updated, await documents.job_history(doc.id))


@router.get("/{document_id}/chunks", response_model=ChunkList)
async def get_chunks(
    doc: ReadableDocument, settings: SettingsDep, documents: DocumentsDep,
    limit: Annotated[int, Query(ge=1, le=10_000, description="chunks per page (at most the server's"
                                                             " max_chunks_page, default 500)")] = 100,
    cursor: Annotated[str | None, Query(max_length=12, pattern=r"^\d+$")] = None,
) -> ChunkList:
    """The document's chunks in order, a page at a time: pass ``next_cursor`` back as ``cursor``."""
    limit = min(limit, settings.max_chunks_page)
    found = await documents.chunks(doc.id, after_ordinal=int(cursor) if cursor else -1, limit=limit + 1)
    items = [ChunkOut.of(c, doc.metadata) for c in found[:limit]]
    return ChunkList(items=items, next_cursor=str(items[-1].ordinal) if len(found) > limit else None)


@router.get("/{document_id}/snapshot", response_class=StreamingResponse,
            responses=body_of("application/json", "the chunk snapshot (chunks.json)", {"type": "object"}))
async def get_snapshot(doc: ReadableDocument, snapshots: SnapshotsDep) -> StreamingResponse:
    """Streamed in 1 MiB blocks: a large document's snapshot never sits whole in the API's memory."""
    blocks = await snapshots.open_blocks(doc.knowledge_base_id, doc.id, doc.published_revision or doc.content_revision)
    if blocks is None:
        raise ResourceNotFoundError("this document has no chunk snapshot yet")
    return StreamingResponse(blocks, media_type="application/json; charset=utf-8")


# Stored bytes are someone else's content: the browser must never sniff them into HTML, and a page
# it renders anyway (an inline image opened on its own) gets no scripts, forms or origin.
NO_SNIFFING = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}


def _disposition(kind: str, filename: str) -> str:
    plain = filename.replace("\\", "_").replace('"', "_").encode("ascii", "replace").decode()
    return f"{kind}; filename=\"{plain}\"; filename*=UTF-8''{quote(filename)}"


async def _streamed(storage: ObjectStorage, key: str, missing: str) -> AsyncIterator[bytes]:
    """The object in blocks, never whole in memory; its first block is read before the response
    starts, so a missing object is a 404 instead of a broken response."""
    blocks = storage.stream(key)
    try:
        first = await anext(blocks)
    except StopAsyncIteration:
        first = b""
    except ResourceNotFoundError as exc:
        raise ResourceNotFoundError(missing) from exc

    async def rest() -> AsyncIterator[bytes]:
        yield first
        async for block in blocks:
            yield block

    return rest()


@router.get("/{document_id}/source", response_class=StreamingResponse,
            responses=body_of("*/*", "the original bytes as an attachment, with their detected media type"))
async def get_source(doc: ReadableDocument, storage: StorageDep) -> StreamingResponse:
    body = await _streamed(storage, doc.object_key, "the source file is no longer stored")
    return StreamingResponse(body, media_type=doc.mime_type, headers={
        **NO_SNIFFING, "Content-Disposition": _disposition("attachment", doc.filename),
        "Content-Length": str(doc.size_bytes)})


@router.get("/{document_id}/assets/{asset_id}", response_class=StreamingResponse,
            responses=body_of("*/*", "the image: PNG, JPEG, GIF, WebP, BMP or TIFF inline; anything else as an "
                                     "application/octet-stream attachment"))
async def get_asset(doc: ReadableDocument, asset_id: UUID, documents: DocumentsDep,
                    storage: StorageDep) -> StreamingResponse:
    for asset in await documents.assets(doc.id):
        if asset.id == asset_id:
            raster = asset.mime_type in RASTER_IMAGE_TYPES
            name = f"asset-{asset.id}{PurePosixPath(asset.object_key).suffix if raster else ''}"
            body = await _streamed(storage, asset.object_key, "the asset is no longer stored")
            return StreamingResponse(body, media_type=asset.mime_type if raster else "application/octet-stream",
                                     headers={**NO_SNIFFING, "Content-Length": str(asset.size_bytes),
                                              "Content-Disposition": _disposition(
                                                  "inline" if raster else "attachment", name)})
    raise ResourceNotFoundError("asset not found")


@router.post("/{document_id}/reindex", status_code=202, response_model=DocumentOut)
async def reindex_document(doc: EditableDocument, lifecycle: LifecycleDep, audit: AuditDep) -> DocumentOut:
    """Parse, chunk, embed and index again (a soft-deleted document is restored). 409 while active."""
    result = await lifecycle.reindex(doc.id)
    await audit.record("document.reindex", knowledge_base_id=doc.knowledge_base_id, document_id=doc.id)
    return DocumentOut.of(result)


@router.delete("/{document_id}", status_code=202, response_model=DocumentOut)
async def delete_document(doc: EditableDocument, lifecycle: LifecycleDep, audit: AuditDep,
                          force: Annotated[bool, Query(description="also remove the source and the record")] = False,
                          ) -> DocumentOut:
    """Soft delete (``force=false``): chunks, vectors, assets and snapshot go, the source stays, the
    document becomes DELETED and can be reindexed. Hard delete: nothing is left. 409 while active."""
    result = await lifecycle.delete(doc.id, hard=force)
    await audit.record("document.delete", knowledge_base_id=doc.knowledge_base_id, document_id=doc.id, force=force)
    return DocumentOut.of(result)


@router.put("/{document_id}/content", status_code=202, response_model=DocumentOut, openapi_extra=CONTENT_BODY)
async def replace_content(doc: EditableDocument, settings: SettingsDep, lifecycle: LifecycleDep, audit: AuditDep,
                          file: UploadedFile) -> DocumentOut:
    """Re-upload: new bytes for a stable document (same limits and checks as an upload). 409 while active."""
    content = await file.read(settings.max_upload_bytes + 1)
    result = await lifecycle.replace_content(doc.id, file.filename, file.content_type, content)
    await audit.record("document.reupload", knowledge_base_id=doc.knowledge_base_id, document_id=doc.id,
                       size_bytes=result.size_bytes, sha256=result.sha256)
    return DocumentOut.of(result)


@router.post("/{document_id}/fail", response_model=DocumentOut)
async def fail_document(doc: EditableDocument, lifecycle: LifecycleDep, audit: AuditDep) -> DocumentOut:
    """Cancel: the job ends, the document is FAILED ("cancelled by operator"), and a worker still on it
    loses its lease and commits nothing more. 409 for stable documents and while a connector fetches."""
    result, previous = await lifecycle.fail(doc.id)  # the status under the row lock
    await audit.record("document.fail", knowledge_base_id=doc.knowledge_base_id, document_id=doc.id,
                       previous_status=previous)
    return DocumentOut.of(result)


@router.post("/{document_id}/recover", status_code=202, response_model=DocumentOut)
async def recover_document(doc: EditableDocument, lifecycle: LifecycleDep, audit: AuditDep) -> DocumentOut:
    """For a running document that seems stuck: fail it and queue a forced reindex, in one call."""
    result, previous = await lifecycle.recover(doc.id)  # the status under the row lock
    await audit.record("document.recover", knowledge_base_id=doc.knowledge_base_id, document_id=doc.id,
                       previous_status=previous)
    return DocumentOut.of(result)

"""Request and response shapes of the HTTP API (SPEC §11). Domain objects are mapped here; they
are never returned directly."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..domain.models import Chunk, Document, DocumentFile, KnowledgeBase
from ..domain.redact import redact_config
from ..domain.status import PIPELINE
from ..services.lifecycle import BulkReindexFilter


class ErrorOut(BaseModel):
    detail: str


class UnsupportedFormatOut(ErrorOut):
    supported_formats: list[str] = Field(default_factory=list, description="the file extensions that can be uploaded")


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


error_response = _error  # for routes that document one more status of their own


# every /api route may answer these; documented so clients (and schema fuzzers) know their shape
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error("invalid request"), 401: _error("missing, invalid, revoked or expired API key"),
    403: _error("this key may not do that"), 404: _error("not found (or not visible to this key)"),
    409: _error("conflict: the document or knowledge base is busy or in the wrong state"),
    413: _error("body too large"), 422: _error("invalid input"),
    415: {"model": UnsupportedFormatOut, "description": "unsupported file format (lists the supported ones)"},
}


def body_of(media_type: str, description: str, schema: dict[str, Any] | None = None) -> dict[int | str, Any]:
    """The documented 200 of a route that answers something other than JSON models."""
    return {200: {"description": description,
                  "content": {media_type: {"schema": schema or {"type": "string", "format": "binary"}}}}}


def _no_control_characters(value: str) -> str:
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise ValueError("must not contain control characters")
    return value


def _printable_text(value: str) -> str:
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\r\t" for ch in value):
        raise ValueError("must not contain control characters other than line breaks and tabs")
    return value


Name = Annotated[str, AfterValidator(_no_control_characters)]
Text = Annotated[str, AfterValidator(_printable_text)]


class KnowledgeBaseSettingsIn(BaseModel):
    chunk_size_tokens: int | None = Field(default=None, ge=32, le=512)
    chunk_overlap_tokens: int | None = Field(default=None, ge=0, le=256)
    dedup_mode: str | None = Field(default=None, pattern="^(off|exact|near)$")
    near_duplicate_threshold: float | None = Field(default=None, gt=0, le=1)
    embedder: str | None = Field(default=None, max_length=20, description="'local' or 'openai' (default: the "
                                 "process's ULTIMATE_RAG_EMBEDDER)")
    embedding_model: str | None = Field(default=None, max_length=200)
    embedding_dimension: int | None = None


class KnowledgeBaseIn(BaseModel):
    name: Name = Field(min_length=1, max_length=200)
    description: Text = Field(default="", max_length=5000)
    settings: KnowledgeBaseSettingsIn | None = None


class KnowledgeBaseOut(BaseModel):
    id: UUID
    name: str
    description: str
    settings: dict[str, Any]
    created_at: datetime
    deleting: bool = False
    document_counts: dict[str, int] | None = None
    embedding: dict[str, Any] | None = Field(default=None, description="the current model: embedder, model, "
                                             "dimension, generation")
    embedding_migration: dict[str, Any] | None = Field(default=None, description="a running model migration: "
                                                       "id, target and progress")

    @classmethod
    def of(cls, kb: KnowledgeBase, counts: dict[str, int] | None = None, *, embedding: dict[str, Any] | None = None,
           migration: dict[str, Any] | None = None) -> KnowledgeBaseOut:
        return cls(id=kb.id, name=kb.name, description=kb.description, settings=kb.settings.to_dict(),
                   created_at=kb.created_at, deleting=kb.deleting, document_counts=counts, embedding=embedding,
                   embedding_migration=migration)


class KnowledgeBaseList(BaseModel):
    items: list[KnowledgeBaseOut]
    next_cursor: str | None = None


class StageTiming(BaseModel):
    stage: str
    started_at: datetime
    seconds: float | None


# The file's fields come first, from DocumentFile (declared once, with the domain's Document). No
# docstring on these models: it would become the schema's description.
class DocumentOut(BaseModel, DocumentFile, frozen=True):
    status: str
    error_message: str | None
    attempts: int
    max_attempts: int
    job_status: str | None
    operation: str | None = Field(default=None, description="what the document's job does: ingest, or delete (a"
                                                            " PENDING document with operation delete is queued for"
                                                            " deletion, ahead of every upload)")
    chunk_count: int
    progress: dict[str, Any]
    parser: dict[str, str | None] | None
    duplicate_of: UUID | None
    dedup: dict[str, Any] = Field(default_factory=dict, description="the duplicate verdict, when there is one")
    content_revision: int = Field(description="the revision being built, or the last one built: every rebuild"
                                              " (reindex, re-upload, recover, connector re-sync) is a new one")
    published_revision: int | None = Field(
        default=None, description="the revision search serves (the last one that reached READY); null: none")
    searchable: bool = Field(default=False, description="search serves this document's published revision: also"
                                                        " while a newer revision is built, or after it failed")
    source: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict, description="the document's own fields: the user's, and "
                                     "the reserved doc, front_matter, s3 and source (docs/metadata.md)")
    warnings: list[str] = Field(default_factory=list,
                                description="what parsing left out or changed: an image downscaled, unreadable pages")
    timings: list[StageTiming]
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime | None
    deleted_at: datetime | None
    error_history: list[dict[str, Any]] | None = None

    @classmethod
    def of(cls, doc: Document, error_history: list[dict[str, Any]] | None = None) -> DocumentOut:
        return cls(
            id=doc.id, knowledge_base_id=doc.knowledge_base_id, filename=doc.filename, mime_type=doc.mime_type,
            size_bytes=doc.size_bytes, sha256=doc.sha256, status=doc.status.value,
            error_message=doc.error_message, attempts=doc.attempts, max_attempts=doc.max_attempts,
            job_status=doc.job_status.value if doc.job_status else None,
            operation=doc.job_operation.value if doc.job_operation else None, chunk_count=doc.chunk_count,
            progress=doc.progress,
            parser={"name": doc.parser_name, "version": doc.parser_version} if doc.parser_name else None,
            duplicate_of=doc.duplicate_of, dedup=doc.dedup, content_revision=doc.content_revision,
            published_revision=doc.published_revision, searchable=doc.searchable,
            source=redact_config(doc.source), metadata=doc.metadata, warnings=list(doc.warnings),
            timings=timings(doc.stage_timings, doc.status.value, doc.updated_at), created_at=doc.created_at,
            updated_at=doc.updated_at,
            indexed_at=doc.indexed_at, deleted_at=doc.deleted_at, error_history=error_history,
        )


def timings(stage_timings: dict[str, str], status: str | None = None,
            since: datetime | None = None) -> list[StageTiming]:
    """Per-stage start times of the current run, with the time each stage took. The timeline ends
    with the document's ``status``: a status the writers do not stamp (FAILED, a retry's PENDING,
    a restored upload) is added as of ``since`` (the document's last change), so the stage before
    it ends there instead of reading as still running."""
    order = {s.value: i for i, s in enumerate(PIPELINE)}
    items = sorted(((k, datetime.fromisoformat(v)) for k, v in stage_timings.items()),
                   key=lambda kv: (kv[1], order.get(kv[0], 99)))
    if status is not None and since is not None and (not items or items[-1][0] != status):
        items = [kv for kv in items if kv[0] != status]
        items.append((status, max(since, items[-1][1]) if items else since))
    out = []
    for i, (stage, started) in enumerate(items):
        nxt = items[i + 1][1] if i + 1 < len(items) else None
        out.append(StageTiming(stage=stage, started_at=started,
                               seconds=(nxt - started).total_seconds() if nxt else None))
    return out


class DocumentPatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(description="a JSON Merge Patch of the document's own fields: keys set, "
                                                 "objects merged, a key set to null removed")


class DocumentList(BaseModel):
    items: list[DocumentOut]
    next_cursor: str | None
    counts: dict[str, int]


class ChunkOut(BaseModel):
    id: UUID
    ordinal: int
    content: str
    token_count: int
    heading_path: list[str]
    locator: dict[str, Any]
    metadata: dict[str, Any]
    document_metadata: dict[str, Any] = Field(default_factory=dict, description="its document's own fields, "
                                              "as the document has them now")

    @classmethod
    def of(cls, chunk: Chunk, document_metadata: dict[str, Any] | None = None) -> ChunkOut:
        return cls(id=chunk.id, ordinal=chunk.ordinal, content=chunk.content, token_count=chunk.token_count,
                   heading_path=list(chunk.heading_path), locator=chunk.locator.to_metadata(),
                   metadata=chunk.metadata, document_metadata=document_metadata or {})


class ChunkList(BaseModel):
    items: list[ChunkOut]
    next_cursor: str | None = None


class ReindexIn(BaseModel):
    filter: BulkReindexFilter = BulkReindexFilter.ALL


class ReindexOut(BaseModel):
    queued: int
    skipped_active: int


class RebuildProgressOut(BaseModel):
    """The last bulk reindex of a knowledge base: a rolling rebuild, during which every document
    keeps serving its published revision until its new one is READY (then swapped at once)."""

    started_at: datetime | None = Field(description="when the last bulk reindex began; null: none ever ran")
    queued: int = Field(default=0, description="documents that bulk reindex queued")
    rebuilt: int = Field(default=0, description="of those, READY with their new revision")
    pending: int = Field(default=0, description="still in the pipeline (their previous revision serving meanwhile)")
    failed: int = Field(default=0, description="FAILED: those with a published revision still serve it")
    removed: int = Field(default=0, description="deleted or OUTDATED since")
    searchable: int = Field(default=0, description="of the queued documents, how many search serves right now")
    queuing: bool = Field(default=False, description="still queueing the knowledge base's documents (in batches):"
                                                     " the counts still grow")
    finished: bool = Field(default=True, description="everything is queued and nothing is pending")

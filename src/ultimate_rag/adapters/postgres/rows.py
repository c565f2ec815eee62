"""Rows to domain objects."""

from __future__ import annotations

from typing import Any

from ...domain.models import (
    Chunk,
    Document,
    DocumentAsset,
    IndexState,
    KnowledgeBase,
    KnowledgeBaseSettings,
    PipelineDocument,
    SourceLocator,
)
from ...domain.status import DocumentStatus, JobOperation, JobStatus


def knowledge_base(row: dict[str, Any]) -> KnowledgeBase:
    return KnowledgeBase(
        id=row["id"], name=row["name"], description=row["description"],
        settings=KnowledgeBaseSettings.from_dict(row["settings"]), created_at=row["created_at"],
        deleting=row.get("deleting", False),
    )


def document(row: dict[str, Any]) -> Document:
    return Document(
        id=row["id"], knowledge_base_id=row["knowledge_base_id"], filename=row["filename"],
        mime_type=row["mime_type"], size_bytes=row["size_bytes"], sha256=row["sha256"],
        object_key=row["object_key"], status=DocumentStatus(row["status"]),
        error_message=row["error_message"], progress=row["progress"] or {},
        parser_name=row["parser_name"], parser_version=row["parser_version"],
        chunk_count=row["chunk_count"], content_revision=row["content_revision"],
        source=row["source"] or {}, duplicate_of=row["duplicate_of"],
        stage_timings=row["stage_timings"] or {}, created_at=row["created_at"],
        updated_at=row["updated_at"], indexed_at=row["indexed_at"], deleted_at=row["deleted_at"],
        attempts=row.get("attempts") or 0, max_attempts=row.get("max_attempts") or 0,
        job_status=JobStatus(row["job_status"]) if row.get("job_status") else None,
        job_operation=JobOperation(row["job_operation"]) if row.get("job_operation") else None,
        dedup=row.get("dedup") or {}, warnings=tuple(row.get("warnings") or ()),
        published_revision=row.get("published_revision"), metadata=row.get("metadata") or {},
    )


def index_state(row: dict[str, Any]) -> IndexState:
    """A row of the ``knowledge_base_index_state`` view (migration 0016), wherever it was read."""
    return IndexState(KnowledgeBaseSettings.from_dict(row["settings"]), row["migration_target"] or None,
                      row["migration_id"])


def pipeline_document(row: dict[str, Any]) -> PipelineDocument:
    """A row of the ``pipeline_documents`` view (the claim's document columns, load_document)."""
    return PipelineDocument(
        id=row["id"], knowledge_base_id=row["knowledge_base_id"], filename=row["filename"],
        mime_type=row["mime_type"], object_key=row["object_key"], sha256=row["sha256"],
        status=DocumentStatus(row["status"]), content_revision=row["content_revision"], created_at=row["created_at"],
        source=row["source"] or {}, dedup_exempt=tuple(row["dedup_exempt"] or ()),
        kb_settings=KnowledgeBaseSettings.from_dict(row["kb_settings"]), kb_deleting=bool(row["kb_deleting"]),
        migration_target=row["migration_target"] or None, migration_id=row["migration_id"])


def chunk(row: dict[str, Any]) -> Chunk:
    return Chunk(
        id=row["id"], document_id=row["document_id"], knowledge_base_id=row["knowledge_base_id"],
        ordinal=row["ordinal"], content=row["content"], token_count=row["token_count"],
        heading_path=tuple(row["heading_path"] or ()), locator=SourceLocator.from_metadata(row["locator"]),
        metadata=row["metadata"] or {},
    )


def asset(row: dict[str, Any]) -> DocumentAsset:
    return DocumentAsset(
        id=row["id"], document_id=row["document_id"], knowledge_base_id=row["knowledge_base_id"],
        object_key=row["object_key"], mime_type=row["mime_type"], size_bytes=row["size_bytes"],
        page=row["page"], description=row["description"], locator_key=row["locator_key"],
    )

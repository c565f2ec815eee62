"""A knowledge base's embedding model and its migration (docs/pipeline.md, "Embedding-model
migration"): start one (202; 409 while one runs), read its progress, abort it. Editor rights,
as for reindex."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from ...domain.errors import ConflictError
from ..audit import AuditDep
from ..deps import EditableKB, MigrationsDep, ModelsDep, ReadableKB, principal
from ..schemas import ERROR_RESPONSES

router = APIRouter(prefix="/api/knowledge-bases", tags=["knowledge bases"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


class EmbeddingMigrationIn(BaseModel):
    embedder: str = Field(max_length=20, description="'local' (the bundled e5 model) or 'openai' "
                          "(the OpenAI-compatible server of ULTIMATE_RAG_EMBEDDING_BASE_URL)")
    model: str | None = Field(default=None, max_length=200, description="the model name (openai: required)")
    dimension: int | None = Field(default=None, description="the vectors' dimension (openai: required)")


class EmbeddingMigrationOut(BaseModel):
    id: int
    knowledge_base_id: Any
    status: str = Field(description="RUNNING, SWITCHED, ABORTED or FAILED")
    source: dict[str, Any]
    target: dict[str, Any]
    progress: dict[str, int] = Field(description="total, done, skipped, failed, pending, chunks, chunks_from_cache")
    failures: list[dict[str, Any]] = Field(default_factory=list, description="documents the new model failed on")
    error_message: str | None = None
    created_at: Any
    finished_at: Any = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> EmbeddingMigrationOut:
        return cls.model_validate({k: row.get(k) for k in cls.model_fields})


@router.post("/{kb_id}/embedding-migration", status_code=202, response_model=EmbeddingMigrationOut)
async def start_migration(kb: EditableKB, body: EmbeddingMigrationIn, models: ModelsDep, migrations: MigrationsDep,
                          audit: AuditDep) -> EmbeddingMigrationOut:
    """Embed every document with another model into a new index generation; search keeps the
    current one until all are done, then switches at once."""
    if kb.deleting:
        raise ConflictError("knowledge base is being deleted")
    spec = models.validate(body.embedder, body.model, body.dimension)
    row = await migrations.start(kb, spec)
    await audit.record("knowledge_base.embedding_migration", knowledge_base_id=kb.id, migration_id=row["id"],
                       **spec.to_dict())
    return EmbeddingMigrationOut.of(row)


@router.get("/{kb_id}/embedding-migration", response_model=EmbeddingMigrationOut | None)
async def migration_progress(kb: ReadableKB, migrations: MigrationsDep) -> EmbeddingMigrationOut | None:
    """The latest migration of the knowledge base (running or finished) with its progress; null
    when it never changed its model."""
    row = await migrations.repository.latest(kb.id)
    return EmbeddingMigrationOut.of(row) if row else None


@router.delete("/{kb_id}/embedding-migration", response_model=EmbeddingMigrationOut)
async def abort_migration(kb: EditableKB, migrations: MigrationsDep, audit: AuditDep) -> EmbeddingMigrationOut:
    """Stop the running migration; its index generation is dropped, the current model stays."""
    row = await migrations.abort(kb.id)
    if row is None:
        raise ConflictError("no embedding-model migration is running for this knowledge base")
    await audit.record("knowledge_base.embedding_migration_abort", knowledge_base_id=kb.id, migration_id=row["id"])
    return EmbeddingMigrationOut.of(row)

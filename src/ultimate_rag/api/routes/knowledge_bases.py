"""Knowledge bases, their document lists, uploads, bulk reindex and search."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from ...domain.errors import ConflictError, InvalidRequestError, ResourceNotFoundError
from ...domain.knowledge_bases import new_settings
from ...domain.models import KnowledgeBase
from ...domain.status import DocumentStatus
from ...services.embedding.migration import EmbeddingMigrations
from ...services.embedding.models import EmbeddingModels
from ...services.lifecycle import BulkReindexFilter
from ..audit import AuditDep
from ..deps import (
    AdminDep,
    DocumentsDep,
    EditableKB,
    IngestionDep,
    KnowledgeBaseDeletionDep,
    KnowledgeBasesDep,
    LifecycleDep,
    MigrationsDep,
    ModelsDep,
    PrincipalDep,
    ReadableKB,
    RetrievalSlotsDep,
    SearchDep,
    SettingsDep,
    principal,
)
from ..schemas import (
    ERROR_RESPONSES,
    DocumentList,
    DocumentOut,
    KnowledgeBaseIn,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    RebuildProgressOut,
    ReindexIn,
    ReindexOut,
    error_response,
)
from ..search_schemas import SearchHit, SearchIn, SearchOut
from ..uploads import UPLOAD_BODY, UploadDep

router = APIRouter(prefix="/api/knowledge-bases", tags=["knowledge bases"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=KnowledgeBaseOut)
async def create_knowledge_base(body: KnowledgeBaseIn, knowledge_bases: KnowledgeBasesDep, models: ModelsDep,
                                settings: SettingsDep, _: AdminDep, audit: AuditDep) -> KnowledgeBaseOut:
    given = body.settings.model_dump(exclude_none=True) if body.settings else {}
    model = models.requested(given.get("embedder"), given.get("embedding_model"), given.get("embedding_dimension"))
    kb = await knowledge_bases.create(body.name.strip(), body.description, new_settings(
        given, model, chunk_size=settings.chunk_size_tokens, chunk_overlap=settings.chunk_overlap_tokens))
    await audit.record("knowledge_base.create", knowledge_base_id=kb.id, name=kb.name)
    return KnowledgeBaseOut.of(kb, {}, embedding=_embedding(models, kb))


def _embedding(models: EmbeddingModels, kb: KnowledgeBase) -> dict[str, Any]:
    return models.spec_of(kb.settings).to_dict() | {"generation": kb.settings.index_generation}


async def _migration(migrations: EmbeddingMigrations, kb: KnowledgeBase) -> dict[str, Any] | None:
    row = await migrations.repository.latest(kb.id)
    if row is None or row["status"] != "RUNNING":
        return None
    return {"id": row["id"], "status": row["status"], "target": row["target"], "progress": row["progress"]}


@router.get("", response_model=KnowledgeBaseList)
async def list_knowledge_bases(knowledge_bases: KnowledgeBasesDep, models: ModelsDep,
                               who: PrincipalDep) -> KnowledgeBaseList:
    kbs = [kb for kb in await knowledge_bases.list() if who.can_read(kb.id)]
    counts = await knowledge_bases.status_counts_of([kb.id for kb in kbs])
    return KnowledgeBaseList(items=[KnowledgeBaseOut.of(kb, counts[kb.id], embedding=_embedding(models, kb))
                                    for kb in kbs])


@router.get("/{kb_id}", response_model=KnowledgeBaseOut)
async def get_knowledge_base(kb: ReadableKB, knowledge_bases: KnowledgeBasesDep, models: ModelsDep,
                             migrations: MigrationsDep) -> KnowledgeBaseOut:
    return KnowledgeBaseOut.of(kb, await knowledge_bases.status_counts(kb.id),
                               embedding=_embedding(models, kb), migration=await _migration(migrations, kb))


@router.delete("/{kb_id}", status_code=202, response_model=KnowledgeBaseOut)
async def delete_knowledge_base(kb: ReadableKB, migrations: MigrationsDep, kb_deletion: KnowledgeBaseDeletionDep,
                                knowledge_bases: KnowledgeBasesDep, _: AdminDep, audit: AuditDep) -> KnowledgeBaseOut:
    """Everything the knowledge base owns is removed through the queue; it stops being searchable at
    once, refuses uploads (409), and disappears when its last document is gone."""
    await migrations.abort(kb.id)  # a model migration of a knowledge base being deleted stops
    queued = await kb_deletion.request(kb.id)
    await audit.record("knowledge_base.delete", knowledge_base_id=kb.id, name=kb.name, documents=queued)
    try:
        kb = await knowledge_bases.get(kb.id)
    except ResourceNotFoundError:  # it owned nothing: already gone
        return KnowledgeBaseOut.of(replace(kb, deleting=True), {})
    return KnowledgeBaseOut.of(kb, await knowledge_bases.status_counts(kb.id))


@router.post("/{kb_id}/documents", status_code=202, response_model=DocumentOut, openapi_extra=UPLOAD_BODY)
async def upload_document(kb: EditableKB, ingestion: IngestionDep, audit: AuditDep, form: UploadDep) -> DocumentOut:
    """Multipart ``file``; optional ``metadata`` (a JSON object of the document's own fields, a 422
    naming a bad one) and ``path`` (where the file lies in the folder being uploaded: the metadata's
    ``source.path``, shown with the file name in lists, search hits and citations)."""
    limit = ingestion.max_upload_bytes
    content = await form.file.read(limit + 1)  # bounded read: one byte over the limit is enough to know
    # the audit entry ("document.upload": filename, size, sha256) is written with the document
    doc = await ingestion.submit(kb, form.file.filename, form.file.content_type, content,
                                 uploaded_by=audit.who.key_prefix, metadata=form.metadata, path=form.path)
    return DocumentOut.of(doc)


@router.get("/{kb_id}/documents", response_model=DocumentList)
async def list_documents(
    kb: ReadableKB, documents: DocumentsDep, knowledge_bases: KnowledgeBasesDep,
    status: Annotated[DocumentStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    q: Annotated[str | None, Query(max_length=200,
                                   description="only documents whose file name or path contains this text")] = None,
) -> DocumentList:
    if q and "\x00" in q:
        raise InvalidRequestError("q must not contain NUL characters")
    items, next_cursor = await documents.list(kb.id, status=status, limit=limit, cursor=cursor,
                                              filename_contains=q)
    counts = await knowledge_bases.status_counts(kb.id)
    return DocumentList(items=[DocumentOut.of(d) for d in items], next_cursor=next_cursor, counts=counts)


@router.post("/{kb_id}/reindex", status_code=202, response_model=ReindexOut)
async def reindex_knowledge_base(kb: EditableKB, lifecycle: LifecycleDep, audit: AuditDep,
                                 body: ReindexIn | None = None) -> ReindexOut:
    """Queue every matching stable document again; active documents are skipped and counted."""
    which = body.filter if body else BulkReindexFilter.ALL
    if kb.deleting:
        raise ConflictError("knowledge base is being deleted")
    queued, skipped = await lifecycle.bulk_reindex(kb.id, which)
    await audit.record("knowledge_base.reindex", knowledge_base_id=kb.id, filter=which, queued=queued,
                       skipped_active=skipped)
    return ReindexOut(queued=queued, skipped_active=skipped)


@router.get("/{kb_id}/reindex", response_model=RebuildProgressOut)
async def reindex_progress(kb: ReadableKB, lifecycle: LifecycleDep) -> RebuildProgressOut:
    """Progress of the last bulk reindex: rebuilt, pending and failed documents (none leaves search
    while it runs)."""
    row = await lifecycle.rebuild_progress(kb.id)
    if row is None:
        return RebuildProgressOut(started_at=None)
    return RebuildProgressOut(**row, finished=row["pending"] == 0 and not row["queuing"])


@router.post("/{kb_id}/search", response_model=SearchOut, responses={
    429: error_response("this key already runs as many searches and answers as it may (see Retry-After)"),
    502: error_response("the configured reranker failed (after retries) or refused the request"),
    503: error_response("the database is unavailable or the search took longer than the statement timeout "
                        "(see Retry-After)"),
    504: error_response("the configured reranker did not answer in time (after retries)")})
async def search(kb: ReadableKB, body: SearchIn, service: SearchDep, who: PrincipalDep,
                 slots: RetrievalSlotsDep) -> SearchOut:
    """429 with ``Retry-After`` while the key already runs ``max_searches_per_key`` searches and answers."""
    if kb.deleting:  # its documents stop being searchable the moment the delete is accepted
        return SearchOut(results=[])
    with slots.held(who.key_prefix):  # one key's searches cannot hold the whole database pool
        outcome = await service.search_outcome(
            kb.id, body.query, body.top_k, mode=body.mode, filters=body.filters.to_domain() if body.filters else None,
            min_score=body.min_score, group_by_document=body.group_by_document)
    return SearchOut(results=[SearchHit.of(r) for r in outcome.results],
                     unmatched_identifiers=list(outcome.unmatched_identifiers))

"""Dependencies handed to routes: one narrow dependency per collaborator a route uses (routes never
see the container), the caller, and knowledge-base access checks. Every ``/api`` route goes
through ``principal``; documents are checked against their KB."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar
from uuid import UUID

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..bootstrap import Container
from ..domain.auth import Principal, same_secret
from ..domain.errors import AuthenticationError, ResourceNotFoundError
from ..domain.models import Document, KnowledgeBase
from ..domain.ports import (
    ApiKeyStore,
    AuditTrail,
    ChunkSnapshotReader,
    DocumentCatalog,
    DocumentEvents,
    KnowledgeBaseStore,
    ObjectStorage,
    OperationsReadout,
)
from ..observability import AnswerMetrics, SearchMetrics
from ..services.answering import AnswerService
from ..services.connectors.runner import ConnectorServices
from ..services.embedding.migration import EmbeddingMigrations
from ..services.embedding.models import EmbeddingModels
from ..services.ingestion import IngestionService
from ..services.knowledge_base_deletion import KnowledgeBaseDeletion
from ..services.lifecycle import DocumentLifecycle
from ..services.search import SearchService
from ..settings import Settings
from .slots import KeySlots, retrieval_slots

T = TypeVar("T")
_bearer = HTTPBearer(auto_error=False, description="an ultimate-rag API key")


def _part(pick: Callable[[Container], T]) -> Callable[[Request], T]:
    """A dependency giving one part of the process's container (built in the app's lifespan)."""
    def dependency(request: Request) -> T:
        return pick(request.app.state.container)
    return dependency


SettingsDep = Annotated[Settings, Depends(_part(lambda c: c.settings))]
KnowledgeBasesDep = Annotated[KnowledgeBaseStore, Depends(_part(lambda c: c.ingest.knowledge_bases))]
DocumentsDep = Annotated[DocumentCatalog, Depends(_part(lambda c: c.ingest.documents))]
StorageDep = Annotated[ObjectStorage, Depends(_part(lambda c: c.infra.storage))]
SnapshotsDep = Annotated[ChunkSnapshotReader, Depends(_part(lambda c: c.infra.snapshots))]
EventsDep = Annotated[DocumentEvents, Depends(_part(lambda c: c.infra.events))]
IngestionDep = Annotated[IngestionService, Depends(_part(lambda c: c.ingest.ingestion))]
LifecycleDep = Annotated[DocumentLifecycle, Depends(_part(lambda c: c.ingest.lifecycle))]
KnowledgeBaseDeletionDep = Annotated[KnowledgeBaseDeletion, Depends(_part(lambda c: c.ingest.knowledge_base_deletion))]
ModelsDep = Annotated[EmbeddingModels, Depends(_part(lambda c: c.embedding.models))]
MigrationsDep = Annotated[EmbeddingMigrations, Depends(_part(lambda c: c.embedding.migrations))]
SearchDep = Annotated[SearchService, Depends(_part(lambda c: c.retrieval.search))]
AnswersDep = Annotated[AnswerService, Depends(_part(lambda c: c.retrieval.answers))]
SearchMetricsDep = Annotated[SearchMetrics, Depends(_part(lambda c: c.retrieval.search_metrics))]
AnswerMetricsDep = Annotated[AnswerMetrics, Depends(_part(lambda c: c.retrieval.answer_metrics))]
ConnectorsDep = Annotated[ConnectorServices, Depends(_part(lambda c: c.connectors))]
ApiKeysDep = Annotated[ApiKeyStore, Depends(_part(lambda c: c.access.api_keys))]
AuditTrailDep = Annotated[AuditTrail, Depends(_part(lambda c: c.access.audit))]
OperationsDep = Annotated[OperationsReadout, Depends(_part(lambda c: c.maintenance.operations))]


def _retrieval_slots(request: Request, settings: SettingsDep) -> KeySlots:
    return retrieval_slots(request, settings)


RetrievalSlotsDep = Annotated[KeySlots, Depends(_retrieval_slots)]  # searches and answers at once, per key
ReadinessDep = Annotated[Callable[[], Awaitable[dict[str, bool]]], Depends(_part(lambda c: c.readiness))]


async def authenticate(api_keys: ApiKeyStore, settings: Settings, authorization: str | None) -> Principal:
    """The caller of an ``Authorization`` header value; AuthenticationError when there is none."""
    scheme, _, key = (authorization or "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
    admin_key = settings.admin_key
    if admin_key and same_secret(key, admin_key):
        return Principal(key_prefix="admin", is_admin=True)
    found = await api_keys.authenticate(key)
    if found is None:
        raise AuthenticationError("invalid API key")
    return found


async def still_valid(api_keys: ApiKeyStore, settings: Settings, who: Principal) -> bool:
    """Whether the key behind ``who`` is still neither revoked nor expired (for long requests)."""
    if who.key_prefix == "admin" and who.is_admin:
        return bool(settings.admin_key)
    return await api_keys.is_valid(who.key_prefix)


async def principal(request: Request, api_keys: ApiKeysDep, settings: SettingsDep,
                    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Principal:
    known = request.scope.get("state", {}).get("principal")
    if isinstance(known, Principal):  # already checked by the gate, before the body was read
        return known
    if credentials is None:
        raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
    return await authenticate(api_keys, settings, f"{credentials.scheme} {credentials.credentials}")


PrincipalDep = Annotated[Principal, Depends(principal)]


async def readable_kb(kb_id: UUID, who: PrincipalDep, knowledge_bases: KnowledgeBasesDep) -> KnowledgeBase:
    if not who.can_read(kb_id):
        raise ResourceNotFoundError("knowledge base not found")
    return await knowledge_bases.get(kb_id)


async def editable_kb(kb_id: UUID, who: PrincipalDep, knowledge_bases: KnowledgeBasesDep) -> KnowledgeBase:
    kb = await readable_kb(kb_id, who, knowledge_bases)
    if not who.can_edit(kb_id):
        _forbidden()
    return kb


async def readable_document(document_id: UUID, who: PrincipalDep, documents: DocumentsDep) -> Document:
    doc = await documents.get(document_id)
    if not who.can_read(doc.knowledge_base_id):
        raise ResourceNotFoundError("document not found")
    return doc


async def editable_document(document_id: UUID, who: PrincipalDep, documents: DocumentsDep) -> Document:
    doc = await readable_document(document_id, who, documents)
    if not who.can_edit(doc.knowledge_base_id):
        _forbidden()
    return doc


def _forbidden() -> None:
    from fastapi import HTTPException

    raise HTTPException(status_code=403, detail="this key may not modify this knowledge base")


async def require_admin(who: PrincipalDep) -> Principal:
    if not who.is_admin:
        _forbidden()
    return who


ReadableKB = Annotated[KnowledgeBase, Depends(readable_kb)]
EditableKB = Annotated[KnowledgeBase, Depends(editable_kb)]
ReadableDocument = Annotated[Document, Depends(readable_document)]
EditableDocument = Annotated[Document, Depends(editable_document)]
AdminDep = Annotated[Principal, Depends(require_admin)]

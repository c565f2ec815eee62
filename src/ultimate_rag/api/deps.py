"""Dependencies handed to routes: the container, the caller, and knowledge-base access checks.
Every ``/api`` route goes through ``principal``; documents are checked against their KB."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

import psycopg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..bootstrap import Container
from ..domain.auth import Principal, same_secret
from ..domain.errors import AuthenticationError, ResourceNotFoundError
from ..domain.models import Document, KnowledgeBase

_bearer = HTTPBearer(auto_error=False, description="an ultimate-rag API key")


async def get_container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


async def authenticate(container: Container, authorization: str | None) -> Principal:
    """The caller of an ``Authorization`` header value; AuthenticationError when there is none."""
    scheme, _, key = (authorization or "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
    admin_key = container.settings.admin_key
    if admin_key and same_secret(key, admin_key):
        return Principal(key_prefix="admin", is_admin=True)
    try:
        found = await container.api_keys.authenticate(key)
    except psycopg.DataError:  # a key the database cannot even compare (a NUL byte): not a key
        found = None
    if found is None:
        raise AuthenticationError("invalid API key")
    return found


async def still_valid(container: Container, who: Principal) -> bool:
    """Whether the key behind ``who`` is still neither revoked nor expired (for long requests)."""
    if who.key_prefix == "admin" and who.is_admin:
        return bool(container.settings.admin_key)
    return await container.api_keys.is_valid(who.key_prefix)


async def principal(request: Request, container: ContainerDep,
                    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Principal:
    known = request.scope.get("state", {}).get("principal")
    if isinstance(known, Principal):  # already checked by the gate, before the body was read
        return known
    if credentials is None:
        raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
    return await authenticate(container, f"{credentials.scheme} {credentials.credentials}")


PrincipalDep = Annotated[Principal, Depends(principal)]


async def readable_kb(kb_id: UUID, who: PrincipalDep, container: ContainerDep) -> KnowledgeBase:
    if not who.can_read(kb_id):
        raise ResourceNotFoundError("knowledge base not found")
    return await container.knowledge_bases.get(kb_id)


async def editable_kb(kb_id: UUID, who: PrincipalDep, container: ContainerDep) -> KnowledgeBase:
    kb = await readable_kb(kb_id, who, container)
    if not who.can_edit(kb_id):
        _forbidden()
    return kb


async def readable_document(document_id: UUID, who: PrincipalDep, container: ContainerDep) -> Document:
    doc = await container.documents.get(document_id)
    if not who.can_read(doc.knowledge_base_id):
        raise ResourceNotFoundError("document not found")
    return doc


async def editable_document(document_id: UUID, who: PrincipalDep, container: ContainerDep) -> Document:
    doc = await readable_document(document_id, who, container)
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

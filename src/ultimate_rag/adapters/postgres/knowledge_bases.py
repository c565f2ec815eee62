"""Knowledge-base rows."""

from __future__ import annotations

import builtins
from uuid import UUID, uuid4

import psycopg
from psycopg.types.json import Jsonb

from ...domain.errors import ConflictError, DatabaseError, ResourceNotFoundError
from ...domain.models import KnowledgeBase, KnowledgeBaseSettings
from . import rows
from .database import Database
from .errors import caused_by
from .sql import load_queries

Q = load_queries("knowledge_bases.sql")


class KnowledgeBaseRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, name: str, description: str, settings: KnowledgeBaseSettings) -> KnowledgeBase:
        try:
            row = await self._db.fetchone(Q["insert_knowledge_base"], {
                "id": uuid4(), "name": name, "description": description, "settings": Jsonb(settings.to_dict())})
        except DatabaseError as exc:
            if caused_by(exc, psycopg.errors.UniqueViolation):
                raise ConflictError(f"a knowledge base named {name!r} already exists") from exc
            raise
        assert row is not None
        return rows.knowledge_base(row)

    async def get(self, kb_id: UUID) -> KnowledgeBase:
        row = await self._db.fetchone(Q["get_knowledge_base"], {"id": kb_id})
        if row is None:
            raise ResourceNotFoundError("knowledge base not found")
        return rows.knowledge_base(row)

    async def list(self) -> list[KnowledgeBase]:
        found = await self._db.fetchall(Q["list_knowledge_bases"])
        return [rows.knowledge_base(r) for r in found]

    async def status_counts(self, kb_id: UUID) -> dict[str, int]:
        found = await self._db.fetchall(Q["status_counts"], {"id": kb_id})
        return {r["status"]: r["n"] for r in found}

    async def status_counts_of(self, kb_ids: builtins.list[UUID]) -> dict[UUID, dict[str, int]]:
        counts: dict[UUID, dict[str, int]] = {kb_id: {} for kb_id in kb_ids}
        for r in await self._db.fetchall(Q["status_counts_of_many"], {"ids": kb_ids}):
            counts[r["knowledge_base_id"]][r["status"]] = r["n"]
        return counts

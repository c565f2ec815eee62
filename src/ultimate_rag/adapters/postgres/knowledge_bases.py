"""Knowledge-base rows."""

from __future__ import annotations

from uuid import UUID, uuid4

import psycopg
from psycopg.types.json import Jsonb

from ...domain.errors import ConflictError, ResourceNotFoundError
from ...domain.models import KnowledgeBase, KnowledgeBaseSettings
from . import rows
from .database import Database


class KnowledgeBaseRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, name: str, description: str, settings: KnowledgeBaseSettings) -> KnowledgeBase:
        try:
            row = await self._db.fetchone(
                "INSERT INTO knowledge_bases (id, name, description, settings) VALUES (%s, %s, %s, %s)"
                " RETURNING *",
                (uuid4(), name, description, Jsonb(settings.to_dict())),
            )
        except psycopg.errors.UniqueViolation as exc:
            raise ConflictError(f"a knowledge base named {name!r} already exists") from exc
        assert row is not None
        return rows.knowledge_base(row)

    async def get(self, kb_id: UUID) -> KnowledgeBase:
        row = await self._db.fetchone("SELECT * FROM knowledge_bases WHERE id = %s", (kb_id,))
        if row is None:
            raise ResourceNotFoundError("knowledge base not found")
        return rows.knowledge_base(row)

    async def list(self) -> list[KnowledgeBase]:
        found = await self._db.fetchall("SELECT * FROM knowledge_bases ORDER BY created_at, id")
        return [rows.knowledge_base(r) for r in found]

    async def status_counts(self, kb_id: UUID) -> dict[str, int]:
        found = await self._db.fetchall(
            "SELECT status, count(*) AS n FROM documents WHERE knowledge_base_id = %s GROUP BY status",
            (kb_id,),
        )
        return {r["status"]: r["n"] for r in found}

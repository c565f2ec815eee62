"""The audit log: who (by key prefix) did what to which knowledge base or document."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from .database import Database
from .sql import load_queries

Q = load_queries("audit.sql")


class AuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, *, key_prefix: str, action: str, knowledge_base_id: UUID | None = None,
                     document_id: UUID | None = None, detail: dict[str, Any] | None = None) -> None:
        await self._db.execute(Q["record"], {"key_prefix": key_prefix, "action": action, "kb": knowledge_base_id,
                                             "document_id": document_id, "detail": Jsonb(detail or {})})

    async def list(self, *, limit: int, before_id: int | None = None, knowledge_base_id: UUID | None = None,
                   ) -> list[dict[str, Any]]:
        return await self._db.fetchall(Q["list"], {"limit": limit, "before": before_id, "kb": knowledge_base_id})

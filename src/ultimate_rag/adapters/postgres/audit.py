"""The audit log: who (by key prefix) did what to which knowledge base or document."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from .database import Database


class AuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, *, key_prefix: str, action: str, knowledge_base_id: UUID | None = None,
                     document_id: UUID | None = None, detail: dict[str, Any] | None = None) -> None:
        await self._db.execute(
            "INSERT INTO audit_log (key_prefix, action, knowledge_base_id, document_id, detail)"
            " VALUES (%s, %s, %s, %s, %s)",
            (key_prefix, action, knowledge_base_id, document_id, Jsonb(detail or {})))

    async def list(self, *, limit: int, before_id: int | None = None, knowledge_base_id: UUID | None = None,
                   ) -> list[dict[str, Any]]:
        where = ["true"]
        params: dict[str, Any] = {"limit": limit}
        if before_id is not None:
            where.append("id < %(before)s")
            params["before"] = before_id
        if knowledge_base_id is not None:
            where.append("knowledge_base_id = %(kb)s")
            params["kb"] = knowledge_base_id
        return await self._db.fetchall(
            f"SELECT * FROM audit_log WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT %(limit)s", params)


def entry_out(row: dict[str, Any]) -> dict[str, Any]:
    at: datetime = row["at"]
    return {"id": row["id"], "at": at.isoformat(), "key_prefix": row["key_prefix"], "action": row["action"],
            "knowledge_base_id": row["knowledge_base_id"], "document_id": row["document_id"],
            "detail": row["detail"]}

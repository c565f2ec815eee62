"""What the backfill reads (``backfill.sql``): chunks indexed before hybrid search existed, and
documents published before their lexical and language shares were recorded (migrations 0022, 0023)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from .database import Database
from .sql import load_queries

Q = load_queries("backfill.sql")


class BackfillRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def chunks_without_sparse(self, after: UUID, limit: int) -> list[dict[str, Any]]:
        """The next ``limit`` chunks of READY documents after chunk id ``after`` that lack a sparse
        vector, in id order."""
        return await self._db.fetchall(Q["chunks_without_sparse"], {"after": after, "n": limit})

    async def documents_without_shares(self, after: UUID, limit: int, *, language: bool) -> list[dict[str, Any]]:
        return await self._db.fetchall(Q["documents_without_lexical"], {"after": after, "n": limit,
                                                                        "with_language": language})

    async def published_chunks(self, document_id: UUID, revision: int) -> list[dict[str, Any]]:
        return await self._db.fetchall(Q["published_chunks"], {"document_id": document_id, "revision": revision})

"""What the sparse backfill reads (``backfill.sql``): chunks indexed before hybrid search existed."""

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

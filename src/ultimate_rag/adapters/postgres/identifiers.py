"""The identifier index in PostgreSQL (SPEC §10, docs/search.md "Identifiers"): each chunk's
identifier keys (domain/identifiers.py) live beside it in ``chunks.identifiers`` with a GIN index
(migration 0021), written by the READY commit in the statement that writes the chunks. A search
looks its query's keys up there, under the searchable rule and the filters (search_filters.py),
and the identifier backfill fills in the keys of chunks written before the index existed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from ...domain.identifiers import IdentifierHits
from ...domain.search import SearchFilters
from .database import Database
from .search_filters import chunk_filters, searchable_chunk
from .sql import load_queries

Q = load_queries("identifiers.sql")


class PostgresIdentifierIndex:
    """Implements ``ports.IdentifierIndex`` and ``ports.IdentifierBackfillStore``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def lookup(self, knowledge_base_id: UUID, keys: Sequence[str], filters: SearchFilters,
                     limit: int) -> IdentifierHits:
        if not keys:
            return IdentifierHits()
        extra, params = chunk_filters(filters)
        rows = await self._db.fetchall(sql.SQL(Q["lookup"]).format(searchable=searchable_chunk(), filters=extra),
                                       {"keys": list(keys), "kb": knowledge_base_id, "n": limit, **params})
        chunks: dict[UUID, set[str]] = {}
        for r in rows:
            chunks.setdefault(r["id"], set()).add(r["key"])
        return IdentifierHits(found=frozenset(r["key"] for r in rows),
                              chunks={chunk: frozenset(held) for chunk, held in chunks.items()})

    async def chunks_without_identifiers(self, limit: int) -> list[dict[str, Any]]:
        return await self._db.fetchall(Q["chunks_without_identifiers"], {"n": limit})

    async def set_identifiers(self, keys: dict[UUID, list[str]]) -> None:
        if keys:
            await self._db.execute(Q["set_identifiers"], {"rows": Jsonb(
                [{"id": str(chunk), "identifiers": held} for chunk, held in keys.items()])})

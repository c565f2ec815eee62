"""The identifier stage of a search (SPEC §10, docs/search.md "Identifiers"): a query naming an
identifier (``SR-88346``, ``E1234``, ``7.3.2``, ``GB/T 7714``) ranks the chunks holding it above
those that do not, in every mode and whatever the vector store.

It is a stage of its own beside the fusion, in three steps:

1. **Candidates**: the identifier index in PostgreSQL (``chunks.identifiers``, GIN) names the
   searchable chunks holding each of the query's keys, under the search's filters — asked at the
   same time as the vector index — and the chunks among them the vector index's top did not bring
   are scored by id (``IndexRouter.scored``, by the search service), so they fuse like any other
   candidate.
2. **Tier**: after fusion, a stable sort by how many of the query's identifiers each chunk holds
   (read with the chunk's row by the double filter): the fused order stays within each tier.
3. **Report**: the identifiers no chunk this search could return holds (``unmatched_identifiers``);
   the ranking is then the usual one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from ..domain.identifiers import IdentifierHits, QueryIdentifier, chunk_identifiers, query_identifiers
from ..domain.ports import IdentifierIndex
from ..domain.search import ScoredChunk, SearchFilters

MAX_NAMED = 16384  # chunks scored by id in one search (the identifier candidates beyond the index's top)


class IdentifierStage:
    def __init__(self, index: IdentifierIndex) -> None:
        self._index = index

    @staticmethod
    def asked(query: str) -> list[QueryIdentifier]:
        return query_identifiers(query)

    async def lookup(self, knowledge_base_id: UUID, asked: Sequence[QueryIdentifier], filters: SearchFilters,
                     limit: int) -> IdentifierHits:
        if not asked:
            return IdentifierHits()
        return await self._index.lookup(knowledge_base_id, [a.key for a in asked], filters, limit)

    @staticmethod
    def named(found: Sequence[ScoredChunk], hits: IdentifierHits) -> list[UUID]:
        """The chunks holding an identifier that ``found`` lacks (at most ``MAX_NAMED``), to score."""
        have = {c.chunk_id for c in found}
        return [c for c in hits.chunks if c not in have][:MAX_NAMED]

    @staticmethod
    def held(asked: Sequence[QueryIdentifier], rows: Mapping[UUID, Mapping[str, Any]]) -> dict[UUID, tuple[str, ...]]:
        """Per chunk (its row as the double filter read it), the query's identifiers it holds. A row
        whose keys were never computed (written before the index; the backfill has not reached it)
        gets them from its text now."""
        if not asked:
            return {}
        out: dict[UUID, tuple[str, ...]] = {}
        for chunk_id, row in rows.items():
            keys = row.get("identifiers")
            held = set(keys if keys is not None else chunk_identifiers(row["content"], row["heading_path"] or ()))
            names = tuple(a.text for a in asked if a.key in held)
            if names:
                out[chunk_id] = names
        return out

    @staticmethod
    def unmatched(asked: Sequence[QueryIdentifier], hits: IdentifierHits,
                  held: Mapping[UUID, tuple[str, ...]]) -> tuple[str, ...]:
        seen = {name for names in held.values() for name in names}
        return tuple(a.text for a in asked if a.key not in hits.found and a.text not in seen)


"""The identifier stage of the search service (services/identifier_stage.py) on in-memory stand-ins:
the index's candidates, the identifier index's chunks (scored by id when the index's top lacks
them), the tier after fusion, the unmatched identifiers, and the highlights. The real index runs in
tests/integration/test_search_identifiers.py and the contract suites (pgvector, Milvus, Qdrant)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid4

from ultimate_rag.domain.identifiers import IdentifierHits, chunk_identifiers
from ultimate_rag.domain.search import ScoredChunk, SearchFilters, SearchMode
from ultimate_rag.services.search import SearchService

from .test_search_capabilities import DOC, KB, Models, Router

NEAR, TICKET, OTHER = uuid4(), uuid4(), uuid4()
CONTENT = {NEAR: "Ticket SR-88364: the customer cannot log in after the update.",
           TICKET: "工单ＳＲ－８８３４６：客户更新后无法登录。",
           OTHER: "Order PO-2024-00017 was shipped on Monday."}


class Rows:
    """The double filter: every chunk READY; ``unindexed`` ones carry no identifier keys yet."""

    def __init__(self, unindexed: Sequence[UUID] = ()) -> None:
        self.unindexed = set(unindexed)

    async def ready_chunks(self, knowledge_base_id: UUID, chunk_ids: list[UUID],
                           filters: SearchFilters) -> list[dict[str, Any]]:
        return [{"id": c, "document_id": DOC, "filename": f"{c}.txt", "content": CONTENT[c], "heading_path": [],
                 "locator": {}, "metadata": {},
                 "identifiers": None if c in self.unindexed else chunk_identifiers(CONTENT[c])}
                for c in chunk_ids if c in CONTENT]


class Index:
    """``ports.IdentifierIndex`` over CONTENT, recording what it was asked."""

    def __init__(self, visible: Sequence[UUID] = tuple(CONTENT)) -> None:
        self.visible = visible
        self.asked: list[tuple[list[str], SearchFilters, int]] = []

    async def lookup(self, knowledge_base_id: UUID, keys: Sequence[str], filters: SearchFilters,
                     limit: int) -> IdentifierHits:
        self.asked.append((list(keys), filters, limit))
        chunks = {c: frozenset(k for k in keys if k in chunk_identifiers(CONTENT[c])) for c in self.visible}
        chunks = {c: held for c, held in chunks.items() if held}
        return IdentifierHits(found=frozenset(k for held in chunks.values() for k in held), chunks=chunks)


class Sparse:
    """The learned sparse encoder's query side (the one method search calls)."""

    async def encode_query(self, text: str) -> dict[int, float]:
        return {7: 1.0}


def service(router: Router, index: Index | None, rows: Rows | None = None) -> SearchService:
    stand_in: Any = Models()
    sparse: Any = Sparse()
    return SearchService(vectors=router, models=stand_in, documents=rows or Rows(), max_top_k=10,
                         max_query_chars=200, identifiers=index, sparse=sparse)


async def test_the_chunk_holding_the_identifier_ranks_first_in_every_mode_though_the_index_missed_it() -> None:
    for mode in SearchMode:
        router = Router(found=[ScoredChunk(NEAR, 0.9, 0.8), ScoredChunk(OTHER, 0.8, 0.1)],
                        named=[ScoredChunk(TICKET, 0.5, 0.2)])
        outcome = await service(router, Index()).search_outcome(KB, "SR-88346 是什么问题？", 3, mode=mode)
        assert outcome.results[0].chunk_id == TICKET, mode
        first = outcome.results[0]
        assert first.identifiers == ("SR-88346",) and first.score == (0.2 if mode is SearchMode.SPARSE else
                                                                      0.5 if mode is SearchMode.DENSE else
                                                                      0.6 * 0.5 + 0.4 * 0.2)
        assert first.content[first.highlights[0][0]:first.highlights[0][1]] == "ＳＲ－８８３４６"
        assert outcome.unmatched_identifiers == ()
        assert ("scored", mode, (TICKET,), router.index_plan) in router.calls  # scored by id, nothing else


async def test_an_identifier_found_nowhere_is_reported_and_the_ranking_is_the_usual_one() -> None:
    router = Router(found=[ScoredChunk(NEAR, 0.9, 0.8), ScoredChunk(TICKET, 0.5, 0.2)],
                    named=[ScoredChunk(OTHER, 0.3, 0.0)])
    index = Index()
    outcome = await service(router, index).search_outcome(KB, "SR-99999 and PO-2024-00017?", 3)
    assert outcome.unmatched_identifiers == ("SR-99999",)
    assert outcome.results[0].chunk_id == OTHER  # the one it did find
    assert [r.chunk_id for r in outcome.results[1:]] == [NEAR, TICKET]  # then fused order
    plain = await service(Router(found=router.found), index).search_outcome(KB, "SR-99999", 3)
    assert plain.unmatched_identifiers == ("SR-99999",) and [r.chunk_id for r in plain.results] == [NEAR, TICKET]
    assert index.asked[-1][0] == ["sr99999"]


async def test_a_query_without_identifiers_never_asks_the_identifier_index() -> None:
    index = Index()
    router = Router(found=[ScoredChunk(NEAR, 0.9, 0.8)])
    outcome = await service(router, index).search_outcome(KB, "the customer cannot log in", 3)
    assert index.asked == [] and outcome.unmatched_identifiers == ()
    assert not any(call[0] == "scored" for call in router.calls)


async def test_filters_travel_to_the_identifier_index() -> None:
    index = Index()
    filters = SearchFilters(filename="*.txt")
    await service(Router(), index).search_outcome(KB, "E1234", 5, filters=filters)
    assert index.asked == [(["e1234"], filters, 50)]


async def test_chunks_written_before_the_index_are_tiered_on_their_text() -> None:
    """The backfill has not reached them: the index does not name them, but a vector candidate that
    holds the identifier still ranks first, and its identifier is not reported unmatched."""
    router = Router(found=[ScoredChunk(NEAR, 0.9, 0.8), ScoredChunk(TICKET, 0.5, 0.2)])
    outcome = await service(router, Index(visible=()), Rows(unindexed=[TICKET])).search_outcome(KB, "SR-88346", 3)
    assert outcome.results[0].chunk_id == TICKET and outcome.unmatched_identifiers == ()


async def test_without_an_identifier_index_the_search_is_the_fused_one() -> None:
    router = Router(found=[ScoredChunk(NEAR, 0.9, 0.8), ScoredChunk(TICKET, 0.5, 0.2)])
    outcome = await service(router, None).search_outcome(KB, "SR-88346", 3)
    assert [r.chunk_id for r in outcome.results] == [NEAR, TICKET] and outcome.unmatched_identifiers == ()

"""The hybrid-search contract: a vector store as ``bootstrap`` builds it (pgvector, or Milvus /
Qdrant wrapped with the PostgreSQL sparse side) answers ``candidates`` in every mode, with the
search filters applied inside the query, and writes and deletes both sides.

Fixture: ``hybrid`` — ``(store, db)``: the store after ``ensure_ready`` and the migrated database
it (or its sparse side) uses. Document and chunk rows are written to the database directly,
since the filters read them there."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any
from uuid import UUID, uuid4

import pytest
from psycopg.types.json import Jsonb

from ..adapters.postgres.identifiers import PostgresIdentifierIndex
from ..adapters.postgres.sql import load_queries
from ..domain.identifiers import chunk_identifiers, identifier_tier, query_identifiers
from ..domain.lexical import chunk_terms, lexical_query, term_index
from ..domain.metadata_filter import matches
from ..domain.metadata_filter import parse as parse_metadata_filter
from ..domain.models import Chunk, EmbeddedChunk, SourceLocator
from ..domain.search import FusionWeights, QueryVectors, SearchFilters, SearchMode, fuse
from .contracts import near, unit_vector
from .eventually import eventually

Q = load_queries("hybrid_contract.sql", __package__)
MODES = (SearchMode.DENSE, SearchMode.SPARSE, SearchMode.HYBRID)


def sparse_of(*indices: int) -> dict[int, float]:
    w = 1 / len(indices) ** 0.5
    return {i: w for i in indices}


async def add_document(db: Any, kb: UUID, filename: str, mime: str, vectors: list[tuple[tuple[float, ...],
                       dict[int, float], tuple[str, ...]]], content: str = "x",
                       metadata: dict[str, Any] | None = None) -> list[EmbeddedChunk]:
    """A READY, published document of one chunk per vector, each holding ``content``."""
    doc = uuid4()
    await db.execute(Q["add_knowledge_base"], (kb, str(kb)))
    await db.execute(Q["add_document"], (doc, kb, filename, mime, Jsonb(metadata or {})))
    items = []
    for i, (dense, sparse, headings) in enumerate(vectors):
        chunk = Chunk(id=uuid4(), document_id=doc, knowledge_base_id=kb, ordinal=i, content=content, token_count=1,
                      heading_path=headings, locator=SourceLocator())
        await db.execute(Q["add_chunk"], (chunk.id, doc, kb, i, content, list(headings),
                                          chunk_identifiers(content, headings)))
        items.append(EmbeddedChunk(chunk=chunk, embedding=dense, sparse=sparse))
    return items


class HybridVectorStoreContract:
    dimension = 16
    visibility_timeout = 10.0

    async def _candidates(self, store: Any, kb: UUID, query: QueryVectors, limit: int, mode: SearchMode,
                          filters: SearchFilters | None = None, expect: int | None = None) -> list[Any]:
        async def fetch() -> list[Any]:
            found, _ = await store.candidates(kb, query, limit, mode=mode, filters=filters)
            return sorted(found, key=lambda c: -(c.dense if mode is SearchMode.DENSE else c.sparse))
        return await eventually(fetch, lambda f: expect is None or len(f) == expect, self.visibility_timeout)

    async def test_every_mode_finds_its_own_nearest(self, hybrid: tuple[Any, Any]) -> None:
        store, db = hybrid
        rng = random.Random(21)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        dense_twin = await add_document(db, kb, "dense.txt", "text/plain", [(q, sparse_of(900, 901), ())])
        sparse_twin = await add_document(db, kb, "sparse.txt", "text/plain",
                                         [(unit_vector(rng, self.dimension), sparse_of(5, 6, 7), ())])
        await store.upsert(kb, dense_twin + sparse_twin)
        query = QueryVectors(dense=q, sparse=sparse_of(5, 6, 7))
        dense = await self._candidates(store, kb, query, 5, SearchMode.DENSE, expect=2)
        assert dense[0].chunk_id == dense_twin[0].chunk.id and dense[0].dense > 0.999
        sparse = await self._candidates(store, kb, query, 5, SearchMode.SPARSE, expect=2)
        assert sparse[0].chunk_id == sparse_twin[0].chunk.id and sparse[0].sparse > 0.999
        hybrid_found = await self._candidates(store, kb, query, 5, SearchMode.HYBRID, expect=2)
        by_id = {c.chunk_id: c for c in hybrid_found}
        assert by_id[sparse_twin[0].chunk.id].sparse > 0.999 and by_id[dense_twin[0].chunk.id].dense > 0.999
        assert by_id[dense_twin[0].chunk.id].sparse == 0.0  # no shared sparse dimension

    async def test_hybrid_finds_an_identifier_the_dense_candidates_miss(self, hybrid: tuple[Any, Any]) -> None:
        """An exact identifier is a sparse match on a chunk the dense side ranks below more than
        ``limit`` others: hybrid must still propose it, with both similarities, so that fusion puts
        it first (a dense top re-scored by sparse similarity would never see it)."""
        store, db = hybrid
        rng = random.Random(24)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        crowd = []
        for i in range(40):  # all nearer the query densely; none shares the identifier's sparse terms
            crowd += await add_document(db, kb, f"crowd-{i}.txt", "text/plain",
                                        [(near(q, rng, 0.9), sparse_of(100 + i, 200 + i), ())])
        ident = await add_document(db, kb, "ticket.txt", "text/plain",
                                   [(near(q, rng, 0.6), sparse_of(7, 8, 9, 300), ())])
        await store.upsert(kb, crowd + ident)
        target = ident[0].chunk.id
        query = QueryVectors(dense=q, sparse=sparse_of(7, 8, 9))
        assert min(c.dense for c in await self._candidates(store, kb, query, 5, SearchMode.DENSE, expect=5)) > \
            sum(a * b for a, b in zip(q, ident[0].embedding, strict=True))  # the dense top 5 misses it

        async def fetch() -> list[Any]:
            found: list[Any] = (await store.candidates(kb, query, 5, mode=SearchMode.HYBRID))[0]
            return found
        def has_target(chunks: list[Any]) -> bool:
            return any(c.chunk_id == target for c in chunks)

        found = await eventually(fetch, has_target, self.visibility_timeout)
        fused = fuse(found, SearchMode.HYBRID, weights=FusionWeights(0.6))
        assert fused[0][0] == target
        assert len(found) >= 6  # and the dense top is there beside it

    async def test_scored_gives_named_chunks_both_similarities_in_every_mode(self, hybrid: tuple[Any, Any]) -> None:
        """The identifier stage's candidates: chunks named by id, scored exactly as ``candidates``
        would score them, whatever their rank; a chunk of another knowledge base is never scored."""
        store, db = hybrid
        rng = random.Random(25)
        kb, other_kb = uuid4(), uuid4()
        q = unit_vector(rng, self.dimension)
        crowd = []
        for i in range(20):
            crowd += await add_document(db, kb, f"crowd-{i}.txt", "text/plain",
                                        [(near(q, rng, 0.9), sparse_of(40 + i), ())])
        far = await add_document(db, kb, "far.txt", "text/plain",
                                 [(unit_vector(rng, self.dimension), sparse_of(5, 6), ())])
        foreign = await add_document(db, other_kb, "other.txt", "text/plain", [(q, sparse_of(5), ())])
        await store.upsert(kb, crowd + far)
        await store.upsert(other_kb, foreign)
        query = QueryVectors(dense=q, sparse=sparse_of(5, 6))
        target, stranger = far[0].chunk.id, foreign[0].chunk.id
        await self._candidates(store, kb, query, 25, SearchMode.DENSE, expect=21)  # all visible
        for mode in MODES:
            found = {c.chunk_id: c for c in await store.scored(kb, query, [target, stranger, uuid4()], mode=mode)}
            assert set(found) == {target}, mode
            if mode is not SearchMode.SPARSE:
                expected = sum(a * b for a, b in zip(q, far[0].embedding, strict=True))
                assert abs(found[target].dense - expected) < 1e-3, mode
            assert found[target].sparse == (0.0 if mode is SearchMode.DENSE else pytest.approx(1.0, abs=1e-3)), mode

    async def test_the_identifier_stage_puts_the_holder_first_in_every_mode(self, hybrid: tuple[Any, Any]) -> None:
        """Tickets from one template, all nearer the query than the one it names, on both sides: the
        identifier index (PostgreSQL, whatever the dense store) names it, the store scores it by id,
        and the tier after fusion ranks it first — in every mode."""
        store, db = hybrid
        rng = random.Random(26)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        tickets = []
        for n in range(88340, 88352):
            tickets += await add_document(db, kb, f"SR-{n}.txt", "text/plain",
                                          [(near(q, rng, 0.6 if n == 88346 else 0.95), sparse_of(1, 2, 3, n % 97), ())],
                                          content=f"Ticket SR-{n}: the customer cannot sign in after the update.")
        await store.upsert(kb, tickets)
        target = next(i.chunk.id for i in tickets if "SR-88346" in i.chunk.content)
        index = PostgresIdentifierIndex(db)
        asked = query_identifiers("SR-88346 是什么问题？")
        hits = await index.lookup(kb, [a.key for a in asked], SearchFilters(), 5)
        assert hits.found == {"sr88346"} and set(hits.chunks) == {target}
        query = QueryVectors(dense=q, sparse=sparse_of(1, 2, 3))
        await self._candidates(store, kb, query, 20, SearchMode.DENSE, expect=12)  # all visible
        for mode in MODES:
            found = (await store.candidates(kb, query, 5, mode=mode))[0]
            assert target not in {c.chunk_id for c in found}, mode  # the index's top misses it
            found += await store.scored(kb, query, list(hits.chunks), mode=mode)
            ranked = identifier_tier(fuse(found, mode, weights=FusionWeights(0.6)),
                                     {c: len(k) for c, k in hits.chunks.items()})
            assert ranked[0][0] == target, mode
        assert (await index.lookup(kb, ["sr88364", "sr8834"], SearchFilters(), 5)).found == frozenset()
        pdf_only = await index.lookup(kb, ["sr88346"], SearchFilters(filename="*.pdf"), 5)
        assert pdf_only.found == frozenset() and not pdf_only.chunks  # under the search's filters

    async def test_bm25_finds_a_rare_term_both_vector_sides_miss(self, hybrid: tuple[Any, Any]) -> None:
        """The lexical side (PostgreSQL, every store): a chunk holding the query's rare term, far
        from the query on both vector sides and behind more than ``limit`` others, is a BM25
        candidate in sparse and hybrid mode, and the other candidates get their BM25 score too
        (0 without the term); dense mode reads no lexical vector."""
        store, db = hybrid
        rng = random.Random(25)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        crowd = []
        for i in range(12):
            crowd += await add_document(db, kb, f"crowd-{i}.txt", "text/plain",
                                        [(near(q, rng, 0.9), sparse_of(1, 2, 3 + i), ())], content="ferry timetable")
        rare = await add_document(db, kb, "rare.txt", "text/plain", [(near(q, rng, 0.3), sparse_of(700), ())],
                                  content="the quokka colony")
        items = [replace(i, lexical=chunk_terms(kb, i.chunk.content)) for i in crowd + rare]
        await store.upsert(kb, items)
        quokka = term_index(kb, "quokka")
        lexical = lexical_query([quokka], 13, {quokka: 1})
        query = QueryVectors(dense=q, sparse=sparse_of(1, 2), lexical=lexical)
        target = rare[0].chunk.id
        for mode in (SearchMode.SPARSE, SearchMode.HYBRID):
            found = {c.chunk_id: c for c in await self._candidates(store, kb, query, 5, mode)}
            assert target in found and found[target].lexical > 0.9, mode
            assert all(c.lexical == 0.0 for k, c in found.items() if k != target), mode
        dense = await self._candidates(store, kb, query, 5, SearchMode.DENSE, expect=5)
        assert target not in {c.chunk_id for c in dense} and all(c.lexical == 0.0 for c in dense)

    async def test_filters_apply_inside_the_query_in_every_mode(self, hybrid: tuple[Any, Any]) -> None:
        store, db = hybrid
        rng = random.Random(22)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        qs = sparse_of(1, 2, 3)
        items = []
        for i in range(30):  # near the query on both sides, and not allowed by the filters
            items += await add_document(db, kb, f"noise-{i}.txt", "text/plain",
                                        [(near(q, rng, 0.95), sparse_of(1, 2, 3, 40 + i), ("Intro",))])
        wanted = await add_document(db, kb, "wanted.pdf", "application/pdf", [
            (unit_vector(rng, self.dimension), sparse_of(3, 500), ("Guide", "Error codes")),
            (unit_vector(rng, self.dimension), sparse_of(3, 501), ("Guide", "Paper"))])
        await store.upsert(kb, items + wanted)
        query = QueryVectors(dense=q, sparse=qs)
        cases = [(SearchFilters(filename="*.pdf"), {c.chunk.id for c in wanted}),
                 (SearchFilters(mime_types=("application/pdf",)), {c.chunk.id for c in wanted}),
                 (SearchFilters(document_ids=(wanted[0].chunk.document_id,)), {c.chunk.id for c in wanted}),
                 (SearchFilters(heading="error codes"), {wanted[0].chunk.id}),
                 (SearchFilters(filename="*.pdf", heading="paper"), {wanted[1].chunk.id})]
        for filters, expected in cases:
            for mode in MODES:
                found = await self._candidates(store, kb, query, 5, mode, filters, expect=len(expected))
                assert {c.chunk_id for c in found} == expected, (filters, mode)

    async def test_metadata_filters_select_the_same_documents_in_every_store(self, hybrid: tuple[Any, Any]) -> None:
        """``filters.metadata`` inside the query: every store, in every mode, returns exactly the
        documents the rule in Python (``metadata_filter.matches``) selects — also after the metadata
        changed under vectors that stayed as they were."""
        store, db = hybrid
        rng = random.Random(27)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        fields = [{"office": ["Berlin", "Seoul", "Paris"][i % 3], "year": 2020 + i % 6, "tags": [f"t{i % 4}", "all"],
                   "signed": f"2024-0{1 + i % 9}-15", "draft": i % 5 == 0, "doc": {"author": f"a{i % 2}"}}
                  | ({"version": i} if i % 4 == 0 else {}) for i in range(24)]
        docs = [await add_document(db, kb, f"d{i}.txt", "text/plain", [(near(q, rng, 0.9), sparse_of(1, 2, 100 + i),
                                                                        ())], metadata=meta)
                for i, meta in enumerate(fields)]
        await store.upsert(kb, [c for d in docs for c in d])
        query = QueryVectors(dense=q, sparse=sparse_of(1, 2))
        await self._candidates(store, kb, query, 30, SearchMode.DENSE, expect=24)  # all visible
        filters = [{"office": "Berlin"}, {"office": {"$ne": "Berlin"}, "year": {"$gte": 2023}},
                   {"year": {"$in": [2021, 2025]}}, {"tags": {"$contains": "t1"}}, {"version": {"$exists": True}},
                   {"signed": {"$gt": "2024-03-01", "$lt": "2024-06-15T12:00:00Z"}}, {"draft": True},
                   {"$or": [{"doc.author": "a1", "year": {"$lt": 2022}}, {"office": {"$nin": ["Berlin", "Seoul"]}}]},
                   {"year": "2021"}, {"version": {"$gt": 10}}]

        async def check() -> None:
            for raw in filters:
                tree = parse_metadata_filter(raw)
                expected = {d[0].chunk.id for d, meta in zip(docs, fields, strict=True) if matches(tree, meta)}
                for mode in MODES:
                    found = await self._candidates(store, kb, query, 30, mode, SearchFilters(metadata=tree),
                                                   expect=len(expected))
                    assert {c.chunk_id for c in found} == expected, (raw, mode)

        await check()
        for i in range(0, 24, 3):  # a PATCH: the metadata changes, the vectors do not
            fields[i] = {**fields[i], "office": "Paris", "year": 2030}
            await db.execute(Q["set_metadata"], (Jsonb(fields[i]), docs[i][0].chunk.document_id))
        await check()

    async def test_deletes_remove_both_sides(self, hybrid: tuple[Any, Any]) -> None:
        store, db = hybrid
        rng = random.Random(23)
        kb = uuid4()
        q = unit_vector(rng, self.dimension)
        a = await add_document(db, kb, "a.txt", "text/plain", [(q, sparse_of(8), ())])
        b = await add_document(db, kb, "b.txt", "text/plain", [(q, sparse_of(8), ())])
        await store.upsert(kb, a + b)
        query = QueryVectors(dense=q, sparse=sparse_of(8))
        assert len(await self._candidates(store, kb, query, 5, SearchMode.HYBRID, expect=2)) == 2
        await store.delete_by_document(a[0].chunk.document_id)
        for mode in MODES:
            found = await self._candidates(store, kb, query, 5, mode, expect=1)
            assert [c.chunk_id for c in found] == [b[0].chunk.id], mode
        await store.delete_by_knowledge_base(kb)
        for mode in MODES:
            assert await self._candidates(store, kb, query, 5, mode, expect=0) == []

"""pgvector's hybrid candidates (real PostgreSQL): the two sides run at once on two connections,
and what they return is exactly the dense top and the sparse top with both true similarities of
every candidate — the same candidates as one statement doing both scans in turn — also when the
pool has a single connection, and with a filter applied inside both scans."""

from __future__ import annotations

import random
from uuid import uuid4

import pytest

from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.adapters.vectors.pgvector import PgVectorStore
from ultimate_rag.domain.search import QueryVectors, SearchFilters, SearchMode
from ultimate_rag.testing.contracts import near, unit_vector
from ultimate_rag.testing.hybrid_contract import add_document, sparse_of

DIM = 16


def cosine(a: dict[int, float], b: dict[int, float]) -> float:
    return sum(w * b.get(i, 0.0) for i, w in a.items())


@pytest.mark.parametrize("pool", [1, 4])
async def test_hybrid_candidates_are_both_tops_with_both_similarities(db_url: str, pool: int) -> None:
    db = Database(db_url, max_size=pool)
    await db.open()
    try:
        store = PgVectorStore(db, DIM)
        await store.ensure_ready()
        rng = random.Random(31)
        kb = uuid4()
        q = unit_vector(rng, DIM)
        items = []
        for i in range(30):
            sparse = sparse_of(1, 2, 50 + i) if i % 3 == 0 else sparse_of(60 + i, 90 + i)
            items += await add_document(db, kb, f"doc-{i}.{'pdf' if i % 2 else 'txt'}", "text/plain",
                                        [(near(q, rng, rng.uniform(0.2, 0.9)), sparse, ())])
        await store.upsert(kb, items)
        qs = sparse_of(1, 2, 3)
        query = QueryVectors(dense=q, sparse=qs)
        by_chunk = {i.chunk.id: i for i in items}
        for filters in (None, SearchFilters(filename="*.pdf")):
            allowed = {c for c, i in by_chunk.items()
                       if filters is None or i.chunk.document_id in {x.chunk.document_id for x in items[1::2]}}
            dense = {c.chunk_id for c in (await store.candidates(kb, query, 5, mode=SearchMode.DENSE,
                                                                 filters=filters))[0]}
            sparse_ids = {c.chunk_id for c in (await store.candidates(kb, query, 5, mode=SearchMode.SPARSE,
                                                                      filters=filters))[0]}
            found, exhausted = await store.candidates(kb, query, 5, mode=SearchMode.HYBRID, filters=filters)
            assert {c.chunk_id for c in found} == dense | sparse_ids and len(dense) == 5 and not exhausted
            assert {c.chunk_id for c in found} <= allowed
            for c in found:  # both similarities are the real ones, whichever side found the chunk
                item = by_chunk[c.chunk_id]
                assert c.dense == pytest.approx(sum(a * b for a, b in zip(q, item.embedding, strict=True)), abs=1e-4)
                assert item.sparse is not None
                assert c.sparse == pytest.approx(cosine(qs, item.sparse), abs=1e-4)
            # more than there is: every allowed chunk, and the index says it has nothing more
            found, exhausted = await store.candidates(kb, query, 100, mode=SearchMode.HYBRID, filters=filters)
            assert {c.chunk_id for c in found} == allowed and exhausted
    finally:
        await db.close()

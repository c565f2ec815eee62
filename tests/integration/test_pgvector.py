"""The pgvector store against a real PostgreSQL: upsert, replace, deletes, and knowledge-base
filtering that stays correct when the knowledge base holds a tiny part of the index."""

from __future__ import annotations

import random
from uuid import UUID, uuid4

from ultimate_rag.domain.models import Chunk, EmbeddedChunk, SourceLocator


def unit(rng: random.Random, dim: int = 384) -> tuple[float, ...]:
    v = [rng.gauss(0, 1) for _ in range(dim)]
    norm = sum(x * x for x in v) ** 0.5
    return tuple(x / norm for x in v)


def item(kb: UUID, doc: UUID, vector: tuple[float, ...], ordinal: int = 0) -> EmbeddedChunk:
    chunk = Chunk(id=uuid4(), document_id=doc, knowledge_base_id=kb, ordinal=ordinal, content="x", token_count=1,
                  heading_path=(), locator=SourceLocator())
    return EmbeddedChunk(chunk=chunk, embedding=vector)


async def test_upsert_search_and_delete(container) -> None:
    store, rng = container.embedding.default_index, random.Random(7)
    kb, doc_a, doc_b = uuid4(), uuid4(), uuid4()
    target = unit(rng)
    near = tuple(0.9 * t + 0.1 * x for t, x in zip(target, unit(rng), strict=True))
    items = [item(kb, doc_a, target), item(kb, doc_a, near, 1), item(kb, doc_b, unit(rng))]
    await store.upsert(kb, items)
    await store.upsert(kb, items)  # idempotent
    hits = await store.search(kb, target, 3)
    assert [h.chunk_id for h in hits[:2]] == [items[0].chunk.id, items[1].chunk.id]
    assert hits[0].score > 0.999 and hits[0].score >= hits[1].score >= hits[2].score
    assert await store.count_by_document(doc_a) == 2
    await store.delete_by_document(doc_a)
    assert await store.count_by_document(doc_a) == 0
    assert [h.chunk_id for h in await store.search(kb, target, 3)] == [items[2].chunk.id]
    await store.delete_by_knowledge_base(kb)
    assert await store.search(kb, target, 3) == []


async def test_small_knowledge_base_inside_a_big_index_still_finds_its_vectors(container) -> None:
    """Without iterative index scans a filtered HNSW query looks at the nearest ef_search vectors
    only, which may all belong to other knowledge bases: the small one would get nothing back."""
    store, rng = container.embedding.default_index, random.Random(11)
    big, small = uuid4(), uuid4()
    for _ in range(4):
        await store.upsert(big, [item(big, uuid4(), unit(rng)) for _ in range(500)])
    mine = [item(small, uuid4(), unit(rng)) for _ in range(5)]
    await store.upsert(small, mine)
    await container.infra.db.execute("ANALYZE chunk_vectors_384")
    query = unit(rng)
    hits = await store.search(small, query, 5)
    assert sorted(h.chunk_id for h in hits) == sorted(i.chunk.id for i in mine)
    # and after most of the big one is deleted
    await container.infra.db.execute(
        "DELETE FROM chunk_vectors_384 WHERE knowledge_base_id = %s AND random() < 0.9", (big,))
    hits = await store.search(small, query, 5)
    assert len(hits) == 5

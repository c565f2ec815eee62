"""The contract suites. Each mixin's cases use one fixture the subclass provides:
``object_storage``, ``vector_store`` (built for ``dimension``) or ``embedder``.

Vector stores may make writes visible to search a little later (Milvus' bounded consistency):
search assertions poll up to ``visibility_timeout`` seconds for the expected answer; counts
(which the pipeline acts on) must be exact at once."""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from ..domain.errors import ResourceNotFoundError
from ..domain.models import Chunk, EmbeddedChunk, SourceLocator, VectorHit
from .eventually import eventually


# ---------------------------------------------------------------------------------------------
class ObjectStorageContract:
    """Fixture: ``object_storage`` — an empty store (or an empty prefix of one)."""

    large_object_bytes = 12 << 20  # above any multipart threshold the fixtures configure

    async def _collect(self, storage: Any, key: str, chunk_size: int = 1 << 20) -> bytes:
        return b"".join([block async for block in storage.stream(key, chunk_size)])

    async def test_put_get_exists(self, object_storage: Any) -> None:
        assert not await object_storage.exists("kb/doc/source")
        await object_storage.put("kb/doc/source", b"hello world", "text/plain")
        assert await object_storage.exists("kb/doc/source")
        assert await object_storage.get("kb/doc/source") == b"hello world"

    async def test_binary_and_empty_objects_round_trip(self, object_storage: Any) -> None:
        data = bytes(range(256)) * 17
        await object_storage.put("a/binary", data, "application/octet-stream")
        await object_storage.put("a/empty", b"", "application/octet-stream")
        assert await object_storage.get("a/binary") == data
        assert await object_storage.get("a/empty") == b""
        assert await object_storage.exists("a/empty")

    async def test_put_replaces(self, object_storage: Any) -> None:
        await object_storage.put("k/v", b"one", "text/plain")
        await object_storage.put("k/v", b"two, longer", "text/plain")
        assert await object_storage.get("k/v") == b"two, longer"

    async def test_missing_object_is_resource_not_found(self, object_storage: Any) -> None:
        with pytest.raises(ResourceNotFoundError):
            await object_storage.get("nothing/here")
        with pytest.raises(ResourceNotFoundError):
            await self._collect(object_storage, "nothing/here")

    async def test_delete_is_idempotent(self, object_storage: Any) -> None:
        await object_storage.put("d/x", b"x", "text/plain")
        await object_storage.delete("d/x")
        await object_storage.delete("d/x")
        await object_storage.delete("never/existed")
        assert not await object_storage.exists("d/x")

    async def test_delete_prefix_removes_only_that_folder(self, object_storage: Any) -> None:
        for key in ("kb1/doc1/source", "kb1/doc1/assets/a.png", "kb1/doc2/source", "kb10/doc1/source"):
            await object_storage.put(key, key.encode(), "application/octet-stream")
        assert await object_storage.delete_prefix("kb1/doc1") == 2
        assert not await object_storage.exists("kb1/doc1/source")
        assert await object_storage.exists("kb1/doc2/source")
        assert await object_storage.delete_prefix("kb1/") == 1
        assert await object_storage.exists("kb10/doc1/source")  # a sibling whose name starts the same
        assert await object_storage.delete_prefix("no/such/prefix") == 0

    async def test_stream_yields_bounded_blocks(self, object_storage: Any) -> None:
        data = os.urandom((3 << 20) + 123)
        await object_storage.put("s/big", data, "application/octet-stream")
        blocks = [block async for block in object_storage.stream("s/big", 1 << 20)]
        assert b"".join(blocks) == data
        assert all(0 < len(b) <= 1 << 20 for b in blocks)
        assert len(blocks) >= 4

    async def test_stream_of_an_empty_object_and_an_abandoned_stream(self, object_storage: Any) -> None:
        """What a download does: an empty object streams to nothing; a client that goes away after
        the first block closes the stream, and the object can be replaced and read again."""
        await object_storage.put("s/empty", b"", "application/octet-stream")
        assert await self._collect(object_storage, "s/empty") == b""
        data = os.urandom((2 << 20) + 5)
        await object_storage.put("s/abandoned", data, "application/octet-stream")
        stream = object_storage.stream("s/abandoned", 1 << 20)
        assert await anext(stream) == data[: 1 << 20]
        await stream.aclose()
        await object_storage.put("s/abandoned", b"replaced", "text/plain")
        assert await self._collect(object_storage, "s/abandoned") == b"replaced"

    async def test_large_object_round_trip(self, object_storage: Any) -> None:
        data = os.urandom(self.large_object_bytes)
        await object_storage.put("large/object", data, "application/octet-stream")
        streamed = hashlib.sha256()
        async for block in object_storage.stream("large/object", 4 << 20):
            streamed.update(block)
        assert streamed.hexdigest() == hashlib.sha256(data).hexdigest()

    async def test_list_keys_with_modification_times(self, object_storage: Any) -> None:
        before = datetime.now(UTC) - timedelta(minutes=5)
        keys = {"l/a/1", "l/a/2", "l/b/1", "other/1"}
        for key in keys:
            await object_storage.put(key, b"x", "text/plain")
        listed = {k: t async for k, t in object_storage.list_keys("l/")}
        assert set(listed) == {"l/a/1", "l/a/2", "l/b/1"}
        after = datetime.now(UTC) + timedelta(minutes=5)
        assert all(t.tzinfo is not None and before <= t <= after for t in listed.values())
        everything = {k async for k, _ in object_storage.list_keys()}
        assert keys <= everything

    async def test_invalid_keys_are_refused(self, object_storage: Any) -> None:
        for key in ("", "/abs", "../escape", "a/../b", "a//b"):
            with pytest.raises(ValueError):
                await object_storage.put(key, b"x", "text/plain")

    async def test_concurrent_writes(self, object_storage: Any) -> None:
        await asyncio.gather(*(object_storage.put(f"c/{i}", str(i).encode(), "text/plain") for i in range(20)))
        got = await asyncio.gather(*(object_storage.get(f"c/{i}") for i in range(20)))
        assert got == [str(i).encode() for i in range(20)]


# ---------------------------------------------------------------------------------------------
def unit_vector(rng: random.Random, dim: int) -> tuple[float, ...]:
    v = [rng.gauss(0, 1) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v))
    return tuple(x / norm for x in v)


def near(target: tuple[float, ...], rng: random.Random, weight: float = 0.9) -> tuple[float, ...]:
    noise = unit_vector(rng, len(target))
    v = [weight * t + (1 - weight) * x for t, x in zip(target, noise, strict=True)]
    norm = math.sqrt(sum(x * x for x in v))
    return tuple(x / norm for x in v)


def embedded(kb: UUID, doc: UUID, vector: tuple[float, ...], ordinal: int = 0, chunk_id: UUID | None = None
             ) -> EmbeddedChunk:
    chunk = Chunk(id=chunk_id or uuid4(), document_id=doc, knowledge_base_id=kb, ordinal=ordinal, content="x",
                  token_count=1, heading_path=(), locator=SourceLocator())
    return EmbeddedChunk(chunk=chunk, embedding=vector)


class VectorStoreContract:
    """Fixture: ``vector_store`` for ``dimension``, after ``ensure_ready``. Tests use fresh random
    knowledge-base and document ids, so a store shared between tests is fine."""

    dimension = 16
    visibility_timeout = 10.0

    async def _search(self, store: Any, kb: UUID, vector: tuple[float, ...], limit: int,
                      check: Callable[[list[VectorHit]], bool]) -> list[VectorHit]:
        return await eventually(lambda: store.search(kb, vector, limit), check, self.visibility_timeout)

    async def test_upsert_search_delete(self, vector_store: Any) -> None:
        rng = random.Random(7)
        kb, doc_a, doc_b = uuid4(), uuid4(), uuid4()
        target = unit_vector(rng, self.dimension)
        items = [embedded(kb, doc_a, target), embedded(kb, doc_a, near(target, rng), 1),
                 embedded(kb, doc_b, unit_vector(rng, self.dimension))]
        await vector_store.upsert(kb, items)
        hits = await self._search(vector_store, kb, target, 3, lambda h: len(h) == 3)
        assert [h.chunk_id for h in hits[:2]] == [items[0].chunk.id, items[1].chunk.id]
        assert hits[0].score > 0.999 and hits[0].score >= hits[1].score >= hits[2].score
        assert await vector_store.count_by_document(doc_a) == 2
        await vector_store.delete_by_document(doc_a)
        assert await vector_store.count_by_document(doc_a) == 0
        assert await vector_store.count_by_document(doc_b) == 1
        hits = await self._search(vector_store, kb, target, 3, lambda h: len(h) == 1)
        assert [h.chunk_id for h in hits] == [items[2].chunk.id]

    async def test_delete_document_except_keeps_the_published_revision(self, vector_store: Any) -> None:
        """A revision swap: the document's vectors other than its published chunks go; other
        documents' stay; with nothing to keep, all of the document's go."""
        rng = random.Random(9)
        kb, doc, other = uuid4(), uuid4(), uuid4()
        published = [embedded(kb, doc, unit_vector(rng, self.dimension), i) for i in range(3)]
        building = [embedded(kb, doc, unit_vector(rng, self.dimension), i) for i in range(4)]
        bystander = embedded(kb, other, unit_vector(rng, self.dimension))
        await vector_store.upsert(kb, [*published, *building, bystander])
        assert await vector_store.count_by_document(doc) == 7
        await vector_store.delete_document_except(doc, [i.chunk.id for i in published])
        assert await vector_store.count_by_document(doc) == 3
        assert await vector_store.count_by_document(other) == 1
        expected = {i.chunk.id for i in [*published, bystander]}
        hits = await self._search(vector_store, kb, published[0].embedding, 10,
                                  lambda h: {x.chunk_id for x in h} == expected)
        assert {h.chunk_id for h in hits} == expected
        await vector_store.delete_document_except(doc, [])
        assert await vector_store.count_by_document(doc) == 0
        assert await vector_store.count_by_document(other) == 1

    async def test_upsert_is_idempotent_and_replaces_by_chunk_id(self, vector_store: Any) -> None:
        rng = random.Random(8)
        kb, doc = uuid4(), uuid4()
        first, second = unit_vector(rng, self.dimension), unit_vector(rng, self.dimension)
        chunk_id = uuid4()
        await vector_store.upsert(kb, [embedded(kb, doc, first, chunk_id=chunk_id)])
        await vector_store.upsert(kb, [embedded(kb, doc, first, chunk_id=chunk_id)])
        assert await vector_store.count_by_document(doc) == 1
        await vector_store.upsert(kb, [embedded(kb, doc, second, chunk_id=chunk_id)])
        assert await vector_store.count_by_document(doc) == 1
        hits = await self._search(vector_store, kb, second, 1, lambda h: bool(h) and h[0].score > 0.999)
        assert hits[0].chunk_id == chunk_id and hits[0].score > 0.999

    async def test_knowledge_bases_are_isolated(self, vector_store: Any) -> None:
        rng = random.Random(9)
        kb_a, kb_b = uuid4(), uuid4()
        shared = unit_vector(rng, self.dimension)
        a = [embedded(kb_a, uuid4(), near(shared, rng, 0.95), i) for i in range(3)]
        b = [embedded(kb_b, uuid4(), shared, i) for i in range(3)]
        await vector_store.upsert(kb_a, a)
        await vector_store.upsert(kb_b, b)
        hits = await self._search(vector_store, kb_a, shared, 10, lambda h: len(h) == 3)
        assert {h.chunk_id for h in hits} == {i.chunk.id for i in a}
        await vector_store.delete_by_knowledge_base(kb_b)
        assert await self._search(vector_store, kb_b, shared, 10, lambda h: not h) == []
        assert len(await self._search(vector_store, kb_a, shared, 10, lambda h: len(h) == 3)) == 3

    async def test_limit_and_score_order(self, vector_store: Any) -> None:
        rng = random.Random(10)
        kb = uuid4()
        items = [embedded(kb, uuid4(), unit_vector(rng, self.dimension), i) for i in range(30)]
        await vector_store.upsert(kb, items)
        query = unit_vector(rng, self.dimension)
        hits = await self._search(vector_store, kb, query, 7, lambda h: len(h) == 7)
        assert len(hits) == 7
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        # the exact nearest neighbours by cosine similarity
        exact = sorted(items, key=lambda i: -sum(x * y for x, y in zip(i.embedding, query, strict=True)))
        assert hits[0].chunk_id == exact[0].chunk.id
        assert all(-1.0001 <= h.score <= 1.0001 for h in hits)

    async def test_empty_and_unknown(self, vector_store: Any) -> None:
        rng = random.Random(12)
        await vector_store.upsert(uuid4(), [])
        assert await vector_store.search(uuid4(), unit_vector(rng, self.dimension), 5) == []
        assert await vector_store.count_by_document(uuid4()) == 0
        await vector_store.delete_by_document(uuid4())
        await vector_store.delete_by_knowledge_base(uuid4())
        await vector_store.ensure_ready()  # idempotent

    async def test_many_items_in_one_upsert(self, vector_store: Any) -> None:
        rng = random.Random(13)
        kb, doc = uuid4(), uuid4()
        items = [embedded(kb, doc, unit_vector(rng, self.dimension), i) for i in range(1200)]
        await vector_store.upsert(kb, items)
        assert await vector_store.count_by_document(doc) == 1200
        probe = items[777]
        hits = await self._search(vector_store, kb, probe.embedding, 1, lambda h: bool(h))
        assert hits[0].chunk_id == probe.chunk.id

    async def test_small_knowledge_base_inside_a_big_index(self, vector_store: Any) -> None:
        """A filtered ANN search must not lose a small knowledge base behind a big one's vectors."""
        rng = random.Random(11)
        big, small = uuid4(), uuid4()
        for _ in range(4):
            await vector_store.upsert(big, [embedded(big, uuid4(), unit_vector(rng, self.dimension))
                                            for _ in range(500)])
        mine = [embedded(small, uuid4(), unit_vector(rng, self.dimension)) for _ in range(5)]
        await vector_store.upsert(small, mine)
        query = unit_vector(rng, self.dimension)
        hits = await self._search(vector_store, small, query, 5, lambda h: len(h) == 5)
        assert sorted(h.chunk_id for h in hits) == sorted(i.chunk.id for i in mine)
        await vector_store.delete_by_knowledge_base(big)
        hits = await self._search(vector_store, small, query, 5, lambda h: len(h) == 5)
        assert len(hits) == 5

    async def test_document_ids_restrict_inside_the_query(self, vector_store: Any) -> None:
        """Search filters reach the store as document ids: the few allowed documents come back even
        when every other vector is nearer the query (no post-filter that returns too few)."""
        rng = random.Random(14)
        kb = uuid4()
        query = unit_vector(rng, self.dimension)
        others = [embedded(kb, uuid4(), near(query, rng, 0.9), i) for i in range(60)]
        far = [embedded(kb, uuid4(), unit_vector(rng, self.dimension)) for _ in range(3)]
        await vector_store.upsert(kb, others + far)
        allowed = [far[0].chunk.document_id, far[2].chunk.document_id]
        hits = await eventually(lambda: vector_store.search(kb, query, 5, document_ids=allowed),
                                lambda h: len(h) == 2, self.visibility_timeout)
        assert sorted(h.chunk_id for h in hits) == sorted([far[0].chunk.id, far[2].chunk.id])
        assert await vector_store.search(kb, query, 5, document_ids=[]) == []


# ---------------------------------------------------------------------------------------------
def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


class EmbedderContract:
    """Fixture: ``embedder``."""

    async def test_identity(self, embedder: Any) -> None:
        assert isinstance(embedder.name, str) and embedder.name
        assert embedder.dimension > 0 and embedder.max_tokens > 0

    async def test_empty_input(self, embedder: Any) -> None:
        assert await embedder.embed_documents([]) == []

    async def test_one_vector_per_text_in_order(self, embedder: Any) -> None:
        texts = [f"Document number {i} talks about topic {i * 7 % 11}." for i in range(21)]
        vectors = await embedder.embed_documents(texts)
        assert len(vectors) == len(texts)
        assert all(len(v) == embedder.dimension and all(math.isfinite(x) for x in v) for v in vectors)
        for i in (0, 9, 20):  # the same text alone gives the same vector: nothing was shuffled
            alone = (await embedder.embed_documents([texts[i]]))[0]
            assert cosine(alone, vectors[i]) > 0.99

    async def test_query_finds_the_related_passage(self, embedder: Any) -> None:
        passages = ["The cat sleeps on the warm windowsill all afternoon.",
                    "Quarterly revenue grew by twelve percent thanks to cloud sales.",
                    "北京是中华人民共和国的首都。"]
        vectors = await embedder.embed_documents(passages)
        query = await embedder.embed_query("How did the company's revenue change?")
        assert len(query) == embedder.dimension
        scores = [cosine(query, v) for v in vectors]
        assert max(range(3), key=scores.__getitem__) == 1
        chinese = await embedder.embed_query("中国的首都是哪里？")
        assert max(range(3), key=lambda i: cosine(chinese, vectors[i])) == 2

    async def test_count_tokens(self, embedder: Any) -> None:
        short = embedder.count_tokens("hello world")
        longer = embedder.count_tokens("hello world " * 50)
        assert 0 < short < longer
        assert embedder.count_tokens("今天天气很好") > 0

    async def test_input_over_the_limit_is_handled(self, embedder: Any) -> None:
        text = " ".join(["token"] * (embedder.max_tokens + 50))
        assert embedder.count_tokens(text) > embedder.max_tokens
        vectors = await embedder.embed_documents([text, "short"])
        assert len(vectors) == 2 and all(len(v) == embedder.dimension for v in vectors)

    async def test_concurrent_calls(self, embedder: Any) -> None:
        texts = [[f"batch {b} text {i}" for i in range(5)] for b in range(4)]
        results = await asyncio.gather(*(embedder.embed_documents(t) for t in texts))
        assert [len(r) for r in results] == [5, 5, 5, 5]
        again = await embedder.embed_documents(texts[2])
        assert all(cosine(x, y) > 0.99 for x, y in zip(again, results[2], strict=True))

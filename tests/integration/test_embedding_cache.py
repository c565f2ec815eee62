"""The embedding cache is no oracle between knowledge bases (an editor of one confirmed an exact
sentence of another by uploading guesses and reading ``progress.from_cache``): it is scoped per
knowledge base, purged with it, and kept at a size bound by the janitor, least recently used first.
Re-ingesting within a knowledge base still comes from the cache."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import httpx
import numpy as np

from ultimate_rag.adapters.embedders.cache import EmbeddingCache
from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain.auth import Role

from .helpers import new_kb, use_embedder
from .test_api import make_kb, process_all, upload
from .test_pipeline_faults import FlakyEmbedder

SECRET = "The vault PIN is 73519."
OTHER_SECRET = "The alarm code of the east wing is 24680."


def record_progress(container) -> dict[str, list[dict[str, Any]]]:
    """Every progress value with a cache count written for a document: what a key polling it (or
    its event stream) could have read while it was EMBEDDING, and as it entered INDEXING (which
    carries the final count on)."""
    seen: dict[str, list[dict[str, Any]]] = {}
    store = container.ingest.processor._store
    report, enter = store.report_progress, store.enter_stage

    def note(lease, progress) -> None:
        if progress and "from_cache" in progress:
            seen.setdefault(str(lease.document_id), []).append(dict(progress))

    async def spy_report(lease, progress):
        note(lease, progress)
        await report(lease, progress)

    async def spy_enter(lease, status, progress=None):
        note(lease, progress)
        await enter(lease, status, progress)

    store.report_progress, store.enter_stage = spy_report, spy_enter
    return seen


async def editor_upload(client: httpx.AsyncClient, key: str, kb: str, name: str, text: str) -> str:
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, text.encode(), "text/plain")},
                          headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 202, r.text
    return r.json()["id"]


async def test_an_editor_of_another_knowledge_base_learns_nothing_from_the_cache(client, container, embedder) -> None:
    progress = record_progress(container)
    spy = FlakyEmbedder(embedder, failures=0, error=RuntimeError())
    use_embedder(container, spy)
    a, b = await make_kb(client, "vault"), await make_kb(client, "guesser")
    (await upload(client, a, "vault.txt", SECRET.encode())).raise_for_status()
    other = (await upload(client, a, "alarm.txt", OTHER_SECRET.encode())).json()["id"]
    await process_all(container)
    editor = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={UUID(b): Role.EDITOR})

    calls = spy.calls
    guess = await editor_upload(client, editor, b, "guess.txt", SECRET)
    await process_all(container)
    assert (await client.get(f"/api/documents/{guess}")).json()["status"] == "READY"
    assert [p["from_cache"] for p in progress[guess]] and all(p["from_cache"] == 0 for p in progress[guess])
    assert spy.calls > calls  # B embedded the sentence itself

    # also after A's document is deleted: nothing of A's lingers for B
    (await client.delete(f"/api/documents/{other}", params={"force": "true"})).raise_for_status()
    await process_all(container)
    calls = spy.calls
    late = await editor_upload(client, editor, b, "late-guess.txt", OTHER_SECRET)
    await process_all(container)
    assert all(p["from_cache"] == 0 for p in progress[late]) and spy.calls > calls

    # within one knowledge base the cache still serves: a reindex embeds nothing again
    calls = spy.calls
    (await client.post(f"/api/documents/{guess}/reindex")).raise_for_status()
    await process_all(container)
    assert spy.calls == calls and progress[guess][-1]["from_cache"] == progress[guess][-1]["total"] > 0


async def test_a_knowledge_bases_entries_go_with_it(client, container) -> None:
    a, b = await make_kb(client, "gone"), await make_kb(client, "stays")
    (await upload(client, a, "a.txt", SECRET.encode())).raise_for_status()
    (await upload(client, b, "b.txt", OTHER_SECRET.encode())).raise_for_status()
    await process_all(container)

    async def entries(kb: str) -> int:
        row = await container.infra.db.fetchone(
            "SELECT count(*) AS n FROM embedding_cache WHERE knowledge_base_id = %s", (UUID(kb),))
        return int(row["n"])

    assert await entries(a) > 0 and await entries(b) > 0
    (await client.delete(f"/api/knowledge-bases/{a}")).raise_for_status()
    await process_all(container)
    assert (await client.get(f"/api/knowledge-bases/{a}")).status_code == 404
    assert await entries(a) == 0 and await entries(b) > 0


async def test_the_janitor_keeps_the_cache_at_its_bound_least_recently_used_first(container) -> None:
    cache = EmbeddingCache(container.infra.db)
    kb = await new_kb(container)
    texts = [f"passage {i}" for i in range(12)]
    await cache.put_many(kb, "m", [(t, [float(i), 1.0, 0.0]) for i, t in enumerate(texts)])
    await container.infra.db.execute("UPDATE embedding_cache SET last_used_at = now() - interval '1 day'"
                               " WHERE knowledge_base_id = %s", (kb,))
    recent = texts[7:10]
    assert len(await cache.get_many(kb, "m", recent)) == 3  # a hit refreshes last_used_at

    janitor = container.maintenance.janitor.with_grace(3600)
    janitor.cache_max_entries = 3
    report = await janitor.sweep()
    assert report.cache_entries == 9 and report.removed_anything
    left = await cache.get_many(kb, "m", texts)
    assert len(left) == 3 and len(await cache.get_many(kb, "m", recent)) == 3
    again = await janitor.sweep()
    assert again.cache_entries == 0
    row = await container.infra.db.fetchone("SELECT count(*) AS n FROM embedding_cache")
    assert row["n"] == 3


async def test_entries_come_back_exactly_in_binary_with_or_without_the_vector_types_registered(container) -> None:
    """Vectors travel in PostgreSQL's binary format both ways (a dense vector as text cost ~200 µs
    of client CPU to write and to parse); a connection on which the vector types are not registered
    (opened before the extension existed) still reads them."""
    from ultimate_rag.adapters.postgres.database import Database

    kb = await new_kb(container)
    dense = [0.1 * i - 3.0 for i in range(384)]
    sparse = {3: 0.5, 16383: 1.25}
    cache = EmbeddingCache(container.infra.db)
    await cache.put_many(kb, "m", [("a text", dense)])
    await cache.put_sparse(kb, "s", 16384, [("a text", sparse)])
    unregistered = Database(container.infra.db.url, min_size=1, max_size=1, register_vector=False)
    await unregistered.open()
    try:
        for db in (container.infra.db, unregistered):
            got = (await EmbeddingCache(db).get_many(kb, "m", ["a text", "another"]))
            assert list(got.values()) == [np.asarray(dense, dtype=np.float32).astype(float).tolist()]
            assert list((await EmbeddingCache(db).get_sparse(kb, "s", ["a text"])).values()) == [sparse]
    finally:
        await unregistered.close()


async def test_a_documents_two_vectors_come_from_one_pass_and_fill_both_caches(client: httpx.AsyncClient,
                                                                              container) -> None:
    """The local model's engine computes a text's dense and sparse vectors together; a text with its
    dense vector cached but not its sparse one gets only the sparse pass, one with both gets none."""
    service = container.embedding.service
    kb = UUID(await make_kb(client, "pairs"))
    both, dense_only, neither = ("Both cached: the pier opens at five.", "Dense cached: the ferry is late.",
                                 "Neither cached: the lighthouse is closed.")
    assert service.sparse is not None and service.embedder.pairs  # hybrid on, the local model's engine
    cache = EmbeddingCache(container.infra.db)
    model = container.embedding.embedder.inner.model()
    (v_both, s_both), (v_dense, _) = service.sparse.inner.pairs_with_model(model, [both, dense_only])
    await cache.put_many(kb, service.embedder.name, [(both, v_both), (dense_only, v_dense)])
    await cache.put_sparse(kb, service.sparse.name, service.sparse.dimension, [(both, s_both)])
    asked: dict[str, list[str]] = {"pair": [], "sparse": []}
    pairs, sparse_only = service.embedder.stream_pairs, service.sparse.stream_documents

    def spy_pairs(texts):
        asked["pair"] += texts
        return pairs(texts)

    def spy_sparse(texts):
        asked["sparse"] += texts
        return sparse_only(texts)

    service.embedder.stream_pairs, service.sparse.stream_documents = spy_pairs, spy_sparse
    try:
        dense, sparse = await service.embed_with_sparse([both, dense_only, neither], knowledge_base_id=kb)
    finally:
        del service.embedder.stream_pairs, service.sparse.stream_documents
    assert asked == {"pair": [neither], "sparse": [dense_only]}
    expected = service.sparse.inner.pairs_with_model(model, [both, dense_only, neither])
    assert np.allclose(np.array(dense), np.array([v for v, _ in expected]), atol=1e-6)
    for got, (_, want) in zip(sparse, expected, strict=True):  # the cache keeps float32 weights
        assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-6 for k in want)
    texts = [both, dense_only, neither]
    assert len(await cache.get_many(kb, service.embedder.name, texts)) == 3
    assert len(await cache.get_sparse(kb, service.sparse.name, texts)) == 3

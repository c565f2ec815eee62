"""A knowledge base's corpus statistics are those of its published revisions, whatever unpublishes
one (docs/search.md): BM25's document frequencies and chunk count (migration 0022) and the language
centroids' sums (0023) take a revision's share in when it is published and out when a newer
revision replaces it or the document is deleted, so a document rebuilt many times counts once and
its search score does not drift; the idle backfill gives documents published before those
migrations their shares."""

from __future__ import annotations

from uuid import UUID

import numpy as np
from psycopg.types.json import Jsonb

from ultimate_rag.domain.embedding_text import stored_embedding_text
from ultimate_rag.domain.lexical import chunk_terms, term_index
from ultimate_rag.domain.search import SearchMode
from ultimate_rag.services.backfill import SparseBackfill
from ultimate_rag.services.job_loop import WorkerConfig

from .helpers import new_kb, queue_document

EN = ("The lighthouse keeper climbs the spiral staircase every evening to light the lamp. Quokkas never "
      "visit the rocky island, but gulls nest on the cliffs below the tower all summer long. ")
ZH = "灯塔看守人每天傍晚爬上螺旋楼梯点亮灯塔。海鸥整个夏天都在塔下的悬崖上筑巢，岛上没有别的动物。"
KO = "등대지기는 매일 저녁 나선형 계단을 올라가 등불을 켠다. 갈매기는 여름 내내 탑 아래 절벽에 둥지를 튼다."


async def run_worker(container) -> None:
    await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle()


async def lexical_stats(container, kb: UUID, term: str) -> tuple[int, int]:
    """(published chunks, document frequency of ``term``) as the knowledge base's statistics say."""
    db = container.infra.db
    corpus = await db.fetchone("SELECT chunks FROM lexical_corpus WHERE knowledge_base_id = %s", (kb,))
    df = await db.fetchone("SELECT df FROM lexical_document_frequencies WHERE knowledge_base_id = %s AND term = %s",
                           (kb, term_index(kb, term)))
    return (int(corpus["chunks"]) if corpus else 0), (int(df["df"]) if df else 0)


async def published_chunks(container, kb: UUID) -> int:
    row = await container.infra.db.fetchone(
        "SELECT count(*) AS n FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE d.knowledge_base_id = %s AND c.revision = d.published_revision", (kb,))
    return int(row["n"])


async def centroid_chunks(container, kb: UUID) -> int:
    row = await container.infra.db.fetchone(
        "SELECT coalesce(sum(n), 0) AS n FROM language_centroids WHERE knowledge_base_id = %s", (kb,))
    return int(row["n"])


async def test_bm25_statistics_follow_the_published_revisions(client, container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, EN * 3)
    other = await queue_document(container, kb, "Quokkas live on Rottnest Island near Perth. " * 4)
    await run_worker(container)
    chunks = await published_chunks(container, kb)
    assert await lexical_stats(container, kb, "quokkas") == (chunks, chunks)  # every chunk of both says it
    assert (await lexical_stats(container, kb, "lighthouse"))[1] >= 1

    for _ in range(2):  # rebuilt twice: new revisions, counted once
        assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
        await run_worker(container)
    assert await lexical_stats(container, kb, "quokkas") == (chunks, chunks)

    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("doc.txt", b"Puffins and gannets. " * 5,
                                                                          "text/plain")})
    assert r.status_code == 202, r.text
    await run_worker(container)
    now = await published_chunks(container, kb)
    assert await lexical_stats(container, kb, "lighthouse") == (now, 0)  # the old content's terms left with it
    assert (await lexical_stats(container, kb, "puffins"))[1] >= 1

    assert (await client.delete(f"/api/documents/{doc}")).status_code == 202
    await run_worker(container)
    assert await lexical_stats(container, kb, "puffins") == (await published_chunks(container, kb), 0)
    assert (await client.delete(f"/api/documents/{other}?force=true")).status_code == 202
    await run_worker(container)
    assert await lexical_stats(container, kb, "quokkas") == (0, 0)


async def test_a_documents_score_is_the_same_after_13_rebuilds_and_a_deleted_document_leaves_the_sums(
        client, container) -> None:
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, text, filename=f"{name}.txt")
            for name, text in (("en", EN), ("zh", ZH), ("ko", KO), ("en2", EN.replace("lighthouse", "beacon")))]
    await run_worker(container)
    query = "누가 매일 저녁 등불을 켜나요?"  # Korean, about every document

    async def scores() -> dict[UUID, float]:
        container.retrieval.search._centroids._cache.clear()  # the centroids' per-process cache (60 s)
        hits = await container.retrieval.search.search(kb, query, 10, group_by_document=True)
        return {h.document_id: h.score for h in hits}

    before = await scores()
    assert set(before) == set(docs)
    assert await centroid_chunks(container, kb) == await published_chunks(container, kb)
    for _ in range(13):
        for doc in docs[:2]:
            assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
        await run_worker(container)
    after = await scores()
    assert await centroid_chunks(container, kb) == await published_chunks(container, kb)
    for doc in docs:
        assert abs(after[doc] - before[doc]) < 1e-5, (doc, before[doc], after[doc])

    assert (await client.delete(f"/api/documents/{docs[0]}")).status_code == 202
    await run_worker(container)
    assert await centroid_chunks(container, kb) == await published_chunks(container, kb)
    rows = await container.infra.db.fetchall(
        "SELECT language, n FROM language_centroids WHERE knowledge_base_id = %s ORDER BY language", (kb,))
    assert {r["language"]: r["n"] for r in rows}["latin"] == 1  # en2 alone
    shares = await container.infra.db.fetchone("SELECT count(*) AS n FROM language_shares WHERE document_id = %s",
                                               (docs[0],))
    assert shares["n"] == 0


async def stored_terms(container, kb: UUID) -> list[tuple[str, list[int]]]:
    """Each chunk's embedded text and the term indexes its lexical vector holds."""
    rows = await container.infra.db.fetchall(
        "SELECT c.content, c.heading_path, l.terms FROM chunks c JOIN chunk_lexical_vectors l ON l.chunk_id = c.id"
        " WHERE c.knowledge_base_id = %s ORDER BY c.id", (kb,))
    return [(stored_embedding_text(r["content"], r["heading_path"]), sorted(r["terms"])) for r in rows]


async def test_korean_is_cut_as_the_knowledge_base_says_at_ingest_search_and_backfill(container) -> None:
    kiwi = container.embedding.korean
    new = await new_kb(container)
    old = await new_kb(container)  # as a knowledge base made before korean_terms was recorded
    settings = (await container.infra.db.fetchone("SELECT settings FROM knowledge_bases WHERE id = %s", (old,)))
    await container.infra.db.execute("UPDATE knowledge_bases SET settings = %s WHERE id = %s", (
        Jsonb({k: v for k, v in settings["settings"].items() if k != "korean_terms"}), old))
    for kb in (new, old):
        await queue_document(container, kb, KO)
    await run_worker(container)
    for kb, korean in ((new, kiwi), (old, None)):
        stored = await stored_terms(container, kb)
        assert stored and all(got == chunk_terms(kb, text, korean).indexes for text, got in stored)
        # the query is cut alike: "등대지기에게" shares the stem, not the particle, with "등대지기는"
        results = await container.retrieval.search.search(kb, "등대지기에게 계단", 3, mode=SearchMode.SPARSE)
        assert results and results[0].content.startswith("등대지기는")
    before = await stored_terms(container, new)
    await container.infra.db.execute("DELETE FROM chunk_sparse_vectors WHERE knowledge_base_id = %s", (new,))
    backfill = next(p for p in container.maintenance.backfill.parts if isinstance(p, SparseBackfill))
    backfill.done = False
    while await backfill.step():
        pass
    assert await stored_terms(container, new) == before  # the backfill cuts with the knowledge base's analyzer


async def test_the_backfill_gives_old_documents_their_shares(container) -> None:
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, text) for text in (EN * 2, ZH, KO)]
    await run_worker(container)
    db = container.infra.db
    expected_stats = await lexical_stats(container, kb, "lighthouse")
    expected = {r["language"]: (r["n"], np.asarray(r["dense_sum"].to_list())) for r in await db.fetchall(
        "SELECT language, n, dense_sum FROM language_centroids WHERE knowledge_base_id = %s", (kb,))}
    # as migrations 0022 and 0023 leave a knowledge base indexed before them
    for statement in ("DELETE FROM lexical_shares", "DELETE FROM chunk_lexical_vectors",
                      "DELETE FROM lexical_document_frequencies", "DELETE FROM lexical_corpus",
                      "DELETE FROM language_shares", "DELETE FROM language_centroids"):
        await db.execute(statement)
    backfill = next(p for p in container.maintenance.backfill.parts if isinstance(p, SparseBackfill))
    backfill.done = False
    while await backfill.step():
        pass
    assert await lexical_stats(container, kb, "lighthouse") == expected_stats
    lexical = await db.fetchone("SELECT count(*) AS n FROM chunk_lexical_vectors WHERE knowledge_base_id = %s", (kb,))
    assert lexical["n"] == await published_chunks(container, kb)
    rows = await db.fetchall("SELECT language, n, dense_sum FROM language_centroids WHERE knowledge_base_id = %s",
                             (kb,))
    assert {r["language"] for r in rows} == set(expected)
    for r in rows:
        n, dense = expected[r["language"]]
        assert r["n"] == n and np.allclose(np.asarray(r["dense_sum"].to_list()), dense, atol=1e-4)
    assert len(docs) == 3

"""Retrieval quality that must hold (docs/search.md; thresholds from the measured numbers in
bench/RESULTS.md, "Retrieval on public sets", not tuned per question):

* cross-language from the first documents: a knowledge base of five documents per language
  (English, Chinese, Korean; from bench/retrieval_set), questions asked in another language than
  their document — the shipped reference means correct the model's same-language bias before the
  knowledge base has means of its own;
* a public set (XQuAD, bench/public_sets.json), where its data has been prepared in
  bench/out/public/xquad: it is not in the repository (its licence and this workplace's rules keep
  it out), so elsewhere the test is skipped and says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from uuid import UUID, uuid4

import numpy as np
import pytest
from bench.retrieval_public import PUBLIC, EvalSet, bm25, korquad, ours, xquad, xquad_split

from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import SearchMode
from ultimate_rag.services.job_loop import WorkerConfig


async def ingest(container, s: EvalSet) -> tuple[UUID, dict[UUID, str]]:
    kb = await container.ingest.knowledge_bases.create(f"quality-{uuid4().hex[:6]}", "", KnowledgeBaseSettings())
    key_of = {}
    for key, (filename, data) in s.files.items():
        key_of[(await container.ingest.ingestion.submit(kb, filename, None, data)).id] = key
    await container.worker(WorkerConfig(heartbeat_seconds=30)).run_until_idle()
    rows = await container.infra.db.fetchall("SELECT filename, status FROM documents WHERE knowledge_base_id = %s",
                                             (kb.id,))
    assert len(rows) == len(s.files) and all(r["status"] == "READY" for r in rows), rows
    return kb.id, key_of


async def ranks(container, kb: UUID, key_of: dict[UUID, str], s: EvalSet, mode: SearchMode,
                category: str) -> list[int | None]:
    out: list[int | None] = []
    for question, relevant, kind in s.queries:
        if kind == category:
            hits = await container.retrieval.search.search(kb, question, 10, mode=mode, group_by_document=True)
            found = [key_of[h.document_id] for h in hits]
            out.append(found.index(relevant) + 1 if relevant in found else None)
    return out


async def bare_ranks(container, kb: UUID, s: EvalSet, category: str) -> list[int]:
    service = container.embedding.service
    keys = list(s.texts)
    docs = np.asarray(await service.embed_passages([s.texts[k] for k in keys], knowledge_base_id=kb))
    out = []
    for question, relevant, kind in s.queries:
        if kind == category:
            q = np.asarray(await service.embedder.embed_query(question))
            out.append(list(np.argsort(-(docs @ q))).index(keys.index(relevant)) + 1)
    return out


def top1(found: Sequence[int | None]) -> float:
    return sum(r == 1 for r in found) / len(found)


def ndcg10(found: Sequence[int | None]) -> float:
    return sum(1 / math.log2(r + 1) for r in found if r and r <= 10) / len(found)


async def test_cross_language_questions_in_a_knowledge_base_of_five_documents_per_language(container) -> None:
    s = ours(per_language=5)
    kb, key_of = await ingest(container, s)
    hybrid = await ranks(container, kb, key_of, s, SearchMode.HYBRID, "cross")
    bare = await bare_ranks(container, kb, s, "cross")
    assert len(hybrid) >= 12
    assert top1(hybrid) >= 0.6, hybrid  # measured 0.93 (14 of 15); the bare model 0.53, dense 1.00, sparse 0.93
    assert top1(hybrid) > top1(bare) + 0.15, (hybrid, bare)
    for mode in (SearchMode.DENSE, SearchMode.SPARSE):
        assert top1(await ranks(container, kb, key_of, s, mode, "cross")) >= top1(bare), mode


@pytest.mark.skipif(not (PUBLIC / "xquad" / "xquad.en.json").is_file(),
                    reason="XQuAD is not in the repository (licence CC BY-SA 4.0; prepare bench/out/public/xquad as "
                           "bench/public_sets.json says to run this test)")
async def test_a_public_set_hybrid_beats_bm25_and_keeps_up_with_the_bare_model(container) -> None:
    """30 XQuAD paragraphs, the English questions and the same in Chinese: hybrid (the default) at
    least as good as BM25 and within 0.02 of the bare model (one question a rank lower: on 30
    questions near the ceiling that is noise; on the whole set hybrid is 0.04 above it,
    bench/RESULTS.md); dense within 0.02 of the bare model too (chunks against whole paragraphs);
    sparse, the lexical side, at least BM25's."""
    full = xquad(limit=30)
    keep = {key for _, key, _ in full.queries}
    s = EvalSet("xquad-30", {k: v for k, v in full.files.items() if k in keep},
                {k: v for k, v in full.texts.items() if k in keep}, full.queries)
    kb, key_of = await ingest(container, s)
    for category in ("en", "zh-en"):
        bare = ndcg10(await bare_ranks(container, kb, s, category))
        lexical = ndcg10([r for r, (_, _, kind) in zip(bm25(s), s.queries, strict=True) if kind == category])
        hybrid = ndcg10(await ranks(container, kb, key_of, s, SearchMode.HYBRID, category))
        assert hybrid >= bare - 0.02 and hybrid >= lexical, (category, hybrid, bare, lexical)
        assert ndcg10(await ranks(container, kb, key_of, s, SearchMode.DENSE, category)) >= bare - 0.02, category
        sparse = await ranks(container, kb, key_of, s, SearchMode.SPARSE, category)
        bm25_ranks = [r for r, (_, _, kind) in zip(bm25(s), s.queries, strict=True) if kind == category]
        asked = [q for q, _, kind in s.queries if kind == category]
        assert ndcg10(sparse) >= lexical, (category, [(q, a, b) for q, a, b in zip(asked, sparse, bm25_ranks,
                                                                                   strict=True) if a != b])


@pytest.mark.skipif(not (PUBLIC / "xquad" / "xquad.en.json").is_file(),
                    reason="XQuAD is not in the repository (licence CC BY-SA 4.0; prepare bench/out/public/xquad as "
                           "bench/public_sets.json says to run this test)")
@pytest.mark.timeout(1200)
async def test_a_public_two_language_knowledge_base_answers_across_languages(container) -> None:
    """XQuAD as a two-language knowledge base (240 paragraphs, half English, half Chinese; each
    paragraph's first question, 60 a category, in both languages): a question finds its paragraph
    in the other language — which the plain query vector ranks below the first 50 candidates for
    most questions, so only the centred query's own candidate search brings it in — and the
    default loses nothing in its own language. Measured on every question (bench/RESULTS.md):
    hybrid en-zh 0.850, zh-en 0.856 (bare model 0.257, 0.022), dense 0.804 / 0.836 (before the
    centred search and language information removal 0.700 / 0.158); hybrid en-en 0.979, zh-zh
    0.975 (bare 0.973, 0.961)."""
    s = xquad_split(limit=60)
    kb, key_of = await ingest(container, s)
    scores = {mode: {category: ndcg10(await ranks(container, kb, key_of, s, mode, category))
                     for category in ("en-en", "zh-zh", "en-zh", "zh-en")}
              for mode in (SearchMode.HYBRID, SearchMode.DENSE)}
    bare = {category: ndcg10(await bare_ranks(container, kb, s, category)) for category in ("en-en", "zh-zh")}
    for category in ("en-zh", "zh-en"):  # measured on these: hybrid 0.893 / 0.905, dense 0.834 / 0.894
        assert scores[SearchMode.HYBRID][category] >= 0.65, (category, scores)
        assert scores[SearchMode.DENSE][category] >= 0.55, (category, scores)
    for category in ("en-en", "zh-zh"):
        assert scores[SearchMode.HYBRID][category] >= bare[category] - 0.02, (category, scores, bare)  # 0.975 / 0.979


@pytest.mark.skipif(not (PUBLIC / "korquad" / "KorQuAD_v1.0_dev.json").is_file(),
                    reason="KorQuAD 1.0 is not in the repository (licence CC BY-ND 2.0 KR; prepare "
                           "bench/out/public/korquad as bench/public_sets.json says to run this test)")
@pytest.mark.timeout(1800)  # 110 documents through the pipeline and 731 questions in four ways: minutes
async def test_a_public_korean_set_hybrid_beats_bm25_with_korean_morphemes(container) -> None:
    """Every question of the benchmark's KorQuAD selection (731 over 110 paragraphs, keyword-heavy:
    each was written on its paragraph; a few minutes): hybrid above BM25 with the product's Korean
    morphemes (bench/RESULTS.md, "Every question of the public sets": 0.969 against 0.961) and no
    mode below the bare model (0.869). The whole selection, not a part: on the first 30 paragraphs
    alone BM25 leads (0.978 against 0.969) — the margin is the set's, not any part's."""
    s = korquad(limit=None)
    kb, key_of = await ingest(container, s)
    bare = ndcg10(await bare_ranks(container, kb, s, "ko"))
    lexical = ndcg10([r for r, (_, _, kind) in zip(bm25(s, container.embedding.korean), s.queries, strict=True)
                      if kind == "ko"])
    hybrid = ndcg10(await ranks(container, kb, key_of, s, SearchMode.HYBRID, "ko"))
    assert hybrid > lexical and hybrid >= bare, (hybrid, lexical, bare)
    for mode in (SearchMode.DENSE, SearchMode.SPARSE):
        assert ndcg10(await ranks(container, kb, key_of, s, mode, "ko")) >= bare, mode

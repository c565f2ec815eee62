"""BM25's pure parts (domain/lexical.py): the terms of a text in every script, the hashed term
space, the chunk side's saturation and length normalisation, the query side's IDF and candidates,
and fusion with a third signal."""

from __future__ import annotations

from uuid import uuid4

from ultimate_rag.adapters.vectors import korean_morphemes
from ultimate_rag.adapters.vectors.korean_morphemes import KiwiMorphemes
from ultimate_rag.domain.lexical import (
    AVERAGE_TERMS,
    BIGRAMS,
    MORPHEMES,
    LexicalShare,
    chunk_terms,
    idf,
    lexical_query,
    query_indexes,
    term_index,
    terms,
)
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import Fusion, FusionWeights, ScoredChunk, SearchMode, fuse


def test_terms_are_words_and_cjk_bigrams_with_identifiers_whole_and_in_parts() -> None:
    assert terms("The Printer") == ["the", "printer"]
    assert terms("서울 지하철") == ["서울", "지하", "하철"]
    assert terms("北京是首都") == ["北京", "京是", "是首", "首都"]
    assert terms("水") == ["水"]  # a one-character run is its own term
    assert terms("東京の地下鉄") == ["東京", "京の", "の地", "地下", "下鉄"]
    assert terms("Error E-4821 in v2.14.1") == ["error", "e-4821", "4821", "in", "v2.14.1", "v2", "14", "1"]
    assert terms("ＳＲ－８８３４６") == terms("sr-88346")  # full-width forms and case fold to the same terms
    assert terms("SR-88346 是什么问题？")[:3] == ["是什", "什么", "么问"]
    assert "a" not in terms("a cat") and "7" in terms("clause 7")


def test_a_korean_analyzer_takes_hangul_and_leaves_every_other_script_as_it_was() -> None:
    seen: list[str] = []

    def analyzer(text: str) -> list[str]:  # stands in for the analyzer's output; the next test runs the real one
        seen.append(text)
        return ["서울", "지하철", "x"]

    assert terms("서울의 지하철 北京 E-4821", analyzer) == ["서울", "지하철", "北京", "e-4821", "4821"]
    assert seen == ["서울의 지하철 北京 e-4821"]  # the folded text, whole (the analyzer needs the context)
    assert terms("北京 E-4821", analyzer) == terms("北京 E-4821")  # no Hangul: the analyzer is not asked
    assert len(seen) == 1


def test_the_korean_analyzer_keeps_the_stems_and_drops_particles_and_endings() -> None:
    kiwi = KiwiMorphemes()  # the real analyzer (its model ships in kiwipiepy_model; loads in a few seconds)
    with_particle, other_particle = terms("서울에서 열렸다", kiwi), terms("서울은 크다", kiwi)
    assert "서울" in with_particle and "서울" in other_particle
    assert not {"에서", "은", "다", "울에", "서울에"} & set(with_particle + other_particle)
    assert terms("SR-88346 문제", kiwi)[-3:] == ["sr-88346", "sr", "88346"]  # identifiers as before


def test_every_instance_cuts_with_the_processs_one_analyzer() -> None:
    KiwiMorphemes()("한국어 검색")
    assert korean_morphemes._kiwi is not None
    loaded = korean_morphemes._analyzer()
    assert KiwiMorphemes()("서울에서") == ["서울"] and korean_morphemes._analyzer() is loaded  # no second load


def test_new_knowledge_bases_cut_korean_into_morphemes_and_older_ones_keep_bigrams() -> None:
    assert KnowledgeBaseSettings().korean_terms == MORPHEMES
    assert KnowledgeBaseSettings.from_dict(KnowledgeBaseSettings().to_dict()).korean_terms == MORPHEMES
    recorded_before = {k: v for k, v in KnowledgeBaseSettings().to_dict().items() if k != "korean_terms"}
    assert KnowledgeBaseSettings.from_dict(recorded_before).korean_terms == BIGRAMS


def test_term_indexes_are_stable_per_knowledge_base_and_never_confuse_near_numbers() -> None:
    kb, other = uuid4(), uuid4()
    assert term_index(kb, "88346") == term_index(kb, "88346")
    assert term_index(kb, "88346") != term_index(kb, "88364")
    assert term_index(kb, "88346") != term_index(other, "88346")  # the GIN lookup stays in one knowledge base
    assert query_indexes(kb, "tea tea TEA") == [term_index(kb, "tea")]


def test_chunk_weights_saturate_with_frequency_and_favour_short_chunks() -> None:
    kb = uuid4()
    once, thrice = chunk_terms(kb, "tea"), chunk_terms(kb, "tea tea tea")
    t = term_index(kb, "tea")
    assert thrice.weights[t] > once.weights[t]
    assert thrice.weights[t] < 3 * once.weights[t]  # saturation
    long = chunk_terms(kb, "tea " + "filler " * int(AVERAGE_TERMS * 2))
    assert long.weights[t] < once.weights[t] and long.length > AVERAGE_TERMS
    share = LexicalShare.of(uuid4(), 1, [once, thrice, long])
    assert share.chunks == 3 and share.frequencies[t] == 3 and share.frequencies[term_index(kb, "filler")] == 1


def test_query_weights_candidates_and_the_score_divisor() -> None:
    rare, common, absent = 1, 2, 3
    query = lexical_query([rare, common, absent], 1000, {rare: 2, common: 900})
    assert query is not None
    assert query.weights[rare] > query.weights[common] > 0 and absent not in query.weights
    assert query.total > sum(query.weights.values())  # an absent term still counts in the divisor
    assert query.total == idf(1000, 2) + idf(1000, 900) + idf(1000, 0)
    assert query.candidates == (rare, common)
    budget = lexical_query([rare, common], 1000, {rare: 2, common: 900}, postings=100)
    assert budget is not None and budget.candidates == (rare,)
    only_common = lexical_query([common], 1000, {common: 900}, postings=100)
    assert only_common is not None and only_common.candidates == (common,)  # never none
    assert lexical_query([absent], 1000, {}) is None
    assert abs(query.score(query.total) - 1.0) < 1e-12


def test_fusion_adds_bm25_in_hybrid_and_sparse_modes_never_in_dense() -> None:
    a, b = uuid4(), uuid4()
    items = [ScoredChunk(a, 0.80, 0.30, 0.0), ScoredChunk(b, 0.79, 0.30, 0.9)]
    assert [i for i, _ in fuse(items, SearchMode.DENSE)] == [a, b]
    assert [i for i, _ in fuse(items, SearchMode.HYBRID, weights=FusionWeights(0.6, 0.1))] == [b, a]
    assert [i for i, _ in fuse(items, SearchMode.HYBRID, weights=FusionWeights(0.6, 0.0))] == [a, b]
    assert [i for i, _ in fuse(items, SearchMode.SPARSE)] == [b, a]
    rrf = dict(fuse(items, SearchMode.HYBRID, fusion=Fusion.RRF))
    assert rrf[b] > rrf[a]  # b has a BM25 rank, a none

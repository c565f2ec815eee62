"""Which languages language centring counts and with which means (adapters/postgres/centroids.py,
docs/search.md): a few Latin-script tables are not a second language, the shipped reference
means serve a small knowledge base, and the correction grows without a jump."""

from __future__ import annotations

from uuid import uuid4

import numpy as np

from ultimate_rag.adapters.embedders.language_prior import LanguagePrior, shipped_prior
from ultimate_rag.adapters.postgres.centroids import LanguageCentroids
from ultimate_rag.domain.search import CentringStrength, LanguageOffsets, QueryVectors

MODEL = "m"
rng = np.random.default_rng(7)
KO, LATIN, ZH = (rng.normal(size=8).astype(np.float32) for _ in range(3))
PRIOR = LanguagePrior(MODEL, {"ko": (KO, np.zeros(4, np.float32)), "latin": (LATIN, np.zeros(4, np.float32))})


def centroids(prior: LanguagePrior | None = PRIOR) -> LanguageCentroids:
    return LanguageCentroids(db=None, prior=prior)  # type: ignore[arg-type]  # blended/offsets read no database


def own(**counts: int) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    means = {"ko": KO + 0.3, "latin": LATIN - 0.3, "zh": ZH}
    return {lang: (means[lang], np.zeros(4, np.float32), n) for lang, n in counts.items()}


def test_a_few_latin_tables_are_not_a_second_language() -> None:
    assert set(centroids().blended(own(ko=1641, latin=49), MODEL, min_chunks=10)) == {"ko"}  # 2.9 %
    assert set(centroids().blended(own(ko=90, latin=10), MODEL, min_chunks=10)) == {"ko", "latin"}


def test_a_small_knowledge_base_gets_the_reference_means_and_its_own_take_over() -> None:
    small = centroids().blended(own(ko=3, latin=3), MODEL, min_chunks=10)
    assert np.allclose(small["ko"][0], (20 * KO + 3 * (KO + 0.3)) / 23)
    large = centroids().blended(own(ko=2000, latin=2000), MODEL, min_chunks=10)
    assert np.allclose(large["ko"][0], KO + 0.3, atol=0.01)
    # a language without a reference mean needs chunks of its own
    assert "zh" not in centroids().blended(own(ko=3, latin=3, zh=3), MODEL, min_chunks=10)
    assert "zh" in centroids().blended(own(ko=30, latin=30, zh=30), MODEL, min_chunks=10)
    assert centroids(prior=None).blended(own(ko=3, latin=3), MODEL, min_chunks=10) == {}


async def test_the_offsets_grow_without_a_jump(monkeypatch) -> None:
    store = centroids()
    query = QueryVectors(dense=tuple(float(x) for x in KO))
    gap = abs(float(KO @ (KO - LATIN)))
    previous = 0.0
    for latin in range(0, 40):  # a Korean knowledge base that English chunks join, one at a time

        async def means(kb: object, model: str, latin: int = latin) -> dict:
            return own(ko=100, latin=latin)

        monkeypatch.setattr(store, "means", means)
        offsets = await store.offsets(uuid4(), MODEL, query, min_chunks=10)
        offset = offsets.dense["ko"] if offsets else 0.0
        assert abs(offset - previous) < 0.2 * gap, latin  # each chunk moves it a little, never all at once
        previous = offset
    assert previous > 0.3 * gap  # and the correction is there in the end


def test_the_shipped_reference_covers_the_local_models_languages() -> None:
    prior = shipped_prior()
    assert prior is not None and prior.model == "multilingual-e5-small-q4"
    assert set(prior.means) == {"latin", "zh", "ko", "ja", "cyrillic", "arabic"}  # every script centring tells apart
    for dense, sparse in prior.means.values():
        assert dense.shape == (384,) and sparse.shape == (16384,) and 0.5 < float(np.linalg.norm(dense)) <= 1.0
    # the same text in every language: the means differ by language, each script's from the others
    languages = sorted(prior.means)
    for i, a in enumerate(languages):
        for b in languages[i + 1:]:
            da, db = prior.means[a][0], prior.means[b][0]
            assert float(da @ db) / float(np.linalg.norm(da) * np.linalg.norm(db)) < 0.99, (a, b)


async def test_the_strength_scales_each_signals_correction(monkeypatch) -> None:
    """``CentringStrength``: how much of each language's measured bias is taken off (the bench's
    sweep varies it; the product takes it all, bench/RESULTS.md)."""
    query = QueryVectors(dense=tuple(float(x) for x in KO), sparse={0: 1.0})

    async def means(kb: object, model: str) -> dict:
        return {lang: (d, np.array([s, 0, 0, 0], np.float32), n)
                for (lang, (d, _, n)), s in zip(own(ko=100, latin=100).items(), (0.4, 0.1), strict=True)}

    full, half = centroids(), centroids()
    half.strength = CentringStrength(dense=0.5, sparse=0.25)
    for store in (full, half):
        monkeypatch.setattr(store, "means", means)
    whole, part = await full.offsets(uuid4(), MODEL, query, min_chunks=10), await half.offsets(uuid4(), MODEL, query,
                                                                                              min_chunks=10)
    assert whole is not None and part is not None and full.strength == CentringStrength()
    assert abs(whole.dense["ko"]) > 0.01 and abs(whole.sparse["ko"]) > 0.01
    assert np.isclose(part.dense["ko"], 0.5 * whole.dense["ko"]) and np.isclose(part.sparse["ko"], 0.25 * whole.sparse["ko"])


async def test_the_centred_query_takes_its_own_languages_mean_off(monkeypatch) -> None:
    """``LanguageOffsets.centred_query``: the query less its language's (blended) mean, normalised,
    for the second dense candidate search; none for a language that does not count."""
    store = centroids()
    query = QueryVectors(dense=tuple(float(x) for x in KO))

    async def means(kb: object, model: str) -> dict:
        return own(ko=2000, latin=2000)  # the knowledge base's own means, almost all of the blend

    monkeypatch.setattr(store, "means", means)
    korean = await store.offsets(uuid4(), MODEL, query, min_chunks=10, language="ko")
    assert korean is not None and korean.centred_query is not None
    blended = store.blended(own(ko=2000, latin=2000), MODEL, min_chunks=10)["ko"][0]
    expected = (KO - blended) / np.linalg.norm(KO - blended)
    assert np.allclose(korean.centred_query, expected, atol=1e-5)
    latin = await store.offsets(uuid4(), MODEL, query, min_chunks=10, language="latin")
    assert latin is not None and latin.centred_query is not None
    assert not np.allclose(latin.centred_query, korean.centred_query)
    for language in ("ja", None):  # not a language of this knowledge base, or not given: no second search
        other = await store.offsets(uuid4(), MODEL, query, min_chunks=10, language=language)
        assert other is not None and other.centred_query is None
        assert other.dense == korean.dense  # the offsets themselves do not depend on it


def removal_of(offsets: LanguageOffsets | None, chunk: np.ndarray) -> float:
    """What language information removal takes off ``chunk``'s dense similarity."""
    if offsets is None:
        return 0.0
    return sum(r * float(np.asarray(d) @ chunk) for r, d in zip(offsets.removal, offsets.directions, strict=True))


async def test_language_information_removal_is_the_projection_and_grows_without_a_jump(monkeypatch) -> None:
    """``LanguageOffsets.directions``/``removal``: with every language counting fully, a chunk loses
    exactly the part of its similarity that lies along the differences of the languages' means
    (the projection onto their span); as a language comes in, its direction comes in with its
    weight — each chunk added moves the removal a little, never all at once."""
    store = centroids()
    query = QueryVectors(dense=tuple(float(x) for x in KO))
    chunk = (LATIN - 0.3 + rng.normal(size=8) * 0.1).astype(np.float32)

    async def full(kb: object, model: str) -> dict:
        return own(ko=2000, latin=2000, zh=2000)

    monkeypatch.setattr(store, "means", full)
    offsets = await store.offsets(uuid4(), MODEL, query, min_chunks=10)
    assert offsets is not None and len(offsets.directions) == 2
    means = np.asarray([m for m, _, _ in store.blended(own(ko=2000, latin=2000, zh=2000), MODEL,
                                                        min_chunks=10).values()])
    basis = np.linalg.svd(means - means.mean(axis=0), full_matrices=False)[2][:2]
    projected = float((basis @ np.asarray(query.dense)) @ (basis @ chunk))
    assert np.isclose(removal_of(offsets, chunk), projected, atol=1e-5)

    previous, steps = 0.0, []
    for latin in range(0, 40):  # a Korean knowledge base that English chunks join, one at a time

        async def means_of(kb: object, model: str, latin: int = latin) -> dict:
            return own(ko=100, latin=latin)

        monkeypatch.setattr(store, "means", means_of)
        now = removal_of(await store.offsets(uuid4(), MODEL, query, min_chunks=10), chunk)
        steps.append(abs(now - previous))
        previous = now
    whole = abs(previous)
    assert whole > 0.01 and max(steps) < 0.3 * whole, steps  # in by the ramp's steps, not at once

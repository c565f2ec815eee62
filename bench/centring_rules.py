"""Ways to merge a two-language knowledge base's dense similarities, compared on the product's own
vectors (docs/search.md "Cross-language centring", known limit of ``dense`` mode).

A multilingual model scores a question higher against its own language's chunks; language
centring shifts each language by its mean similarity to the question. In ``dense`` mode, with no
lexical signal beside it, that costs same-language questions (XQuAD split in English and Chinese:
``zh-zh`` 0.875 against the bare model's 0.961). This script asks whether another rule keeps
same-language answers at the bare model while still crossing languages: it reads every chunk's
vector and every question's (through the product's pipeline and embedder, knowledge bases kept as
``bench.retrieval --public`` keeps them), then ranks documents by each rule in memory:

* ``plain``: the bare similarity;
* ``offsets-S``: the product's per-language shift at strength S (``CentringStrength.dense``);
* ``vector-centring``: query and chunk each less their language's mean, then cosine;
* ``projection-A``: the directions separating the languages' means taken out of query and chunk
  (language information removal), at A of their weight;
* ``zscore``: each language's similarities standardised over that language's chunks;
* ``background-K``: each language's similarities less the mean of its ranks 2..K+1;
* ``interleave``: the plain and the centred rankings taken in turn, the plain first;
* ``gate-T``: the centred order, but the question's own language's best chunk first when it leads
  its runner-up by T standard deviations of that language's similarities.

Candidates as the product takes them: the plain vector's top 50 (``pool=plain``), or with the
centred query's own top 50 (``pool=both``, the product since 2026-12-04). nDCG@10 per category,
documents ranked by their best chunk.

    .venv/bin/python -m bench.centring_rules [--data DIR] [--work DIR]

Prints ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from ultimate_rag.bootstrap import build
from ultimate_rag.domain.search import script_language
from ultimate_rag.services.search import MIN_CANDIDATES, MIN_LANGUAGE_CHUNKS
from ultimate_rag.settings import Settings

from .common import machine
from .retrieval_public import PUBLIC, EvalSet, ingest, open_database, ours, xquad_split


@dataclass
class Vectors:
    """A set as vectors: each chunk's (with its document and language) and each question's."""

    chunks: np.ndarray
    documents: np.ndarray
    languages: np.ndarray
    questions: np.ndarray
    queries: list[tuple[str, str, str]]
    means: dict[str, np.ndarray]  # each fully counting language's blended mean (the product's blend)

    def ranked(self, order: np.ndarray) -> list[str]:
        seen: dict[str, None] = {}
        for i in order:
            seen.setdefault(str(self.documents[i]), None)
        return list(seen)


async def vectors_of(container, s: EvalSet) -> Vectors:
    kb, key_of = await ingest(container, s)
    rows = await container.infra.db.fetchall(
        "SELECT c.document_id, c.content FROM chunks c JOIN documents d ON d.id = c.document_id "
        "WHERE d.knowledge_base_id = %s AND d.status = 'READY' ORDER BY c.document_id, c.ordinal", (kb,))
    service = container.embedding.service
    chunks = np.asarray(await service.embed_passages([r["content"] for r in rows], knowledge_base_id=kb),
                        dtype=np.float32)
    questions = np.asarray([await service.embedder.embed_query(q) for q, _, _ in s.queries], dtype=np.float32)
    languages = np.asarray([script_language(r["content"]) for r in rows])
    centroids = container.retrieval.search._centroids  # the product's blend of its own and the reference means
    model = service.embedder.name
    blended = centroids.blended(await centroids.means(kb, model), model, min_chunks=MIN_LANGUAGE_CHUNKS)
    means = {language: dense for language, (dense, _, weight) in blended.items() if weight >= 1}
    return Vectors(chunks, np.asarray([key_of[r["document_id"]] for r in rows]), languages, questions,
                   s.queries, means)


# a rule: (question vector, its language, plain similarities, candidate indexes, the set) -> scores
Rule = Callable[[np.ndarray, str, np.ndarray, np.ndarray, Vectors], np.ndarray]


def offsets(strength: float) -> Rule:
    def rule(q: np.ndarray, _: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
        similarity = {lang: float(q @ m) for lang, m in v.means.items()}
        average = sum(similarity.values()) / len(similarity)
        return np.asarray([plain[i] - strength * (similarity.get(v.languages[i], average) - average) for i in idx])
    return rule


def vector_centring(q: np.ndarray, language: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
    centred = q - v.means.get(language, 0)
    centred = centred / np.linalg.norm(centred)
    chunks = v.chunks[idx] - np.asarray([v.means.get(v.languages[i], np.zeros_like(q)) for i in idx])
    return np.asarray(chunks @ centred / np.linalg.norm(chunks, axis=1))


def projection(alpha: float) -> Rule:
    """Language information removal (Yang et al., 2021, "A Simple and Effective Method To Eliminate
    the Self Language Bias in Multilingual Representations"): the directions that separate the
    languages' means taken out of both vectors — each chunk by its own coordinates along them, not
    its language's (which is what the offsets amount to) — at ``alpha`` of their weight."""
    def rule(q: np.ndarray, _: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
        means = np.asarray(list(v.means.values()))
        basis = np.linalg.svd(means - means.mean(axis=0), full_matrices=False)[2][:len(means) - 1]
        return np.asarray(plain[idx] - alpha * (v.chunks[idx] @ basis.T) @ (basis @ q))
    return rule


def per_language(statistic: Callable[[np.ndarray], tuple[float, float]]) -> Rule:
    """Each language's similarities less its ``statistic``'s location, over its scale."""
    def rule(q: np.ndarray, _: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
        out = plain[idx].copy()
        for language in set(v.languages[idx]):
            location, scale = statistic(np.sort(plain[v.languages == language])[::-1])
            mask = v.languages[idx] == language
            out[mask] = (out[mask] - location) / scale
        return out
    return rule


def interleave(q: np.ndarray, language: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
    first = idx[np.argsort(-plain[idx])]
    second = idx[np.argsort(-offsets(1.0)(q, language, plain, idx, v))]
    order = list(dict.fromkeys(x for pair in zip(first, second, strict=True) for x in pair))
    score = np.zeros(len(plain))
    score[order] = -np.arange(len(order))
    return score[idx]


def gate(threshold: float) -> Rule:
    def rule(q: np.ndarray, language: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
        centred = offsets(1.0)(q, language, plain, idx, v)
        own = np.flatnonzero(v.languages == language)
        if len(own) >= 3:
            ranked = own[np.argsort(-plain[own])]
            if plain[ranked[0]] - plain[ranked[1]] >= threshold * plain[own].std() and ranked[0] in idx:
                centred[list(idx).index(ranked[0])] = np.inf
        return centred
    return rule


def background(k: int, descending: np.ndarray) -> tuple[float, float]:
    """The mean of ranks 2..k+1 (the language's runners-up), unscaled."""
    return (float(descending[1:k + 1].mean()) if len(descending) > 1 else 0.0), 1.0


def plain_rule(q: np.ndarray, language: str, plain: np.ndarray, idx: np.ndarray, v: Vectors) -> np.ndarray:
    return plain[idx]


RULES: dict[str, Rule] = {
    "plain": plain_rule,
    **{f"offsets-{s:g}": offsets(s) for s in (1.0, 0.75, 0.5, 0.25)},
    "vector-centring": vector_centring,
    **{f"projection-{a:g}": projection(a) for a in (1.0, 0.75)},
    "zscore": per_language(lambda s: (float(s.mean()), float(s.std()) + 1e-6)),
    **{f"background-{k}": per_language(partial(background, k)) for k in (5, 20)},
    "interleave": interleave,
    **{f"gate-{t:g}": gate(t) for t in (0.5, 1.0, 1.5)},
}


def candidates(q: np.ndarray, language: str, plain: np.ndarray, v: Vectors, both: bool) -> np.ndarray:
    top = list(np.argsort(-plain)[:MIN_CANDIDATES])
    if both and len(v.means) >= 2 and language in v.means:
        centred = q - v.means[language]
        top += [i for i in np.argsort(-(v.chunks @ centred))[:MIN_CANDIDATES] if i not in top]
    return np.asarray(top)


def evaluate(v: Vectors, rule: Rule, both: bool) -> dict[str, float]:
    gains: dict[str, list[float]] = defaultdict(list)
    for q, (question, relevant, category) in zip(v.questions, v.queries, strict=True):
        language = script_language(question)
        plain = v.chunks @ q
        idx = candidates(q, language, plain, v, both)
        scores = rule(q, language, plain, idx, v) if len(v.means) >= 2 else plain[idx]
        ranked = v.ranked(idx[np.argsort(-scores, kind="stable")])[:10]
        gains[category].append(1 / math.log2(ranked.index(relevant) + 2) if relevant in ranked else 0.0)
    return {category: float(np.mean(g)) for category, g in sorted(gains.items())}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=PUBLIC, help="the prepared public sets (bench/public_sets.json)")
    parser.add_argument("--work", type=Path, default=PUBLIC, help="where the knowledge bases are kept between runs")
    args = parser.parse_args()
    print(machine())
    url = open_database(False, args.work)
    container = build(Settings(database_url=url, data_dir=args.work / "data", admin_key="bench-admin-key-0123456789"),
                      url=url)
    await container.open()
    sets = [ours(), ours(per_language=6)]
    if (args.data / "xquad").is_dir():
        sets += [xquad_split(None, args.data), xquad_split(None, args.data, per_language=8)]
    try:
        for s in sets:
            v = await vectors_of(container, s)
            for both in (False, True):
                for name, rule in RULES.items():
                    scores = " ".join(f"{c}={x:.3f}" for c, x in evaluate(v, rule, both).items())
                    print(f"RESULT centring set={s.name} pool={'both' if both else 'plain'} rule={name} {scores}",
                          flush=True)
    finally:
        await container.close()


if __name__ == "__main__":
    asyncio.run(main())

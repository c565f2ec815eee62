"""Retrieval quality on public sets beside our own (``bench/retrieval --public``; SPEC §10).

Sets (bench/public_sets.json: source, commit, licence, how to prepare; the data stays outside git
in a folder given with ``--data``, bench/out/public/<set>/ by default): XQuAD (English paragraphs; English questions and the same questions in
Chinese), KorQuAD 1.0 (Korean), and ours (bench/retrieval_set: paraphrase, cross-language and
identifier questions over English, Chinese and Korean documents), also as a small knowledge base
(6 documents per language), and its identifier family (bench/retrieval_set/families.py). Every set's categories are reported apart.

For each: nDCG@10, recall@10, MRR@10 (and top-1) of BM25 (``bm25s``, on the product's tokens:
words, CJK character bigrams), the bare model (brute-force cosine of whole documents' ``passage:``
vectors), and the product's ``dense``, ``sparse`` and ``hybrid`` modes through the search service
the API calls (documents through the real pipeline into one knowledge base per set; results
grouped by document); beside the default ``hybrid``: ``hybrid-no-bm25`` (dense and learned sparse
alone, the fusion search had before BM25), ``hybrid-no-centring`` and ``hybrid-no-bm25-no-centring``
(language centring off), ``dense-no-centred-search`` and ``hybrid-no-centred-search`` (without
the centred query's candidate search), ``dense-language-offsets`` and ``hybrid-language-offsets``
(each chunk shifted by its language's mean offset instead of losing its own language component),
and what each of the two steps costs a hybrid search (median time, with and without, on the set's
first 300 questions). ``--sweep``: hybrid at several fusion weights and
reciprocal-rank fusion, to choose the defaults across every set, not one.

    .venv/bin/python -m bench.retrieval --public [--data DIR] [--sweep] [--fresh] [--limit 150 | --limit 0]

``--limit 0`` asks every question of a public set (the published numbers in bench/RESULTS.md);
``--limit N`` at most N a category, each paragraph's first.

The knowledge bases are kept in bench/out/public/pg between runs (``--work`` elsewhere; ``--fresh``
starts over).
Prints ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from uuid import UUID

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

from ultimate_rag.adapters.postgres.embedded import start_embedded_postgres
from ultimate_rag.adapters.postgres.migrations import migrate
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.lexical import KoreanMorphemes, terms
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.domain.search import CentringStrength, Fusion, FusionWeights, SearchMode, script_language
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings

from .common import REPO, machine
from .retrieval_set.build import files as our_files
from .retrieval_set.documents import DOCUMENTS
from .retrieval_set.families import FAMILY_DOCUMENTS, FAMILY_QUESTIONS
from .retrieval_set.questions import QUESTIONS

PUBLIC = REPO / "bench" / "out" / "public"
MODES = (SearchMode.DENSE, SearchMode.SPARSE, SearchMode.HYBRID)


@dataclass
class EvalSet:
    name: str
    files: dict[str, tuple[str, bytes]]  # key -> (filename, bytes) as uploaded
    texts: dict[str, str]  # key -> the document's text (bare model, BM25)
    queries: list[tuple[str, str, str]]  # (question, relevant key, category)


def _squad(path: Path) -> list[dict]:
    return list(json.loads(path.read_text(encoding="utf-8"))["data"])


def _xquad(root: Path) -> tuple[list[dict], list[dict], dict[str, str]]:
    """XQuAD's English and Chinese articles, and each question's Chinese wording by its id."""
    en, zh = _squad(root / "xquad" / "xquad.en.json"), _squad(root / "xquad" / "xquad.zh.json")
    return en, zh, {q["id"]: q["question"] for a in zh for p in a["paragraphs"] for q in p["qas"]}


def _asked(paragraph: dict, limit: int | None) -> list[dict]:
    """A paragraph's questions: its first only when questions are limited, else every one."""
    return paragraph["qas"][:1] if limit is not None else paragraph["qas"]


def xquad(limit: int | None, root: Path = PUBLIC) -> EvalSet:
    """``limit``: at most that many questions per category, each paragraph's first; None: every
    question (1,190 a category, as MTEB's XQuADRetrieval asks them)."""
    en, _, zh_question = _xquad(root)
    texts, queries = {}, []
    for a, article in enumerate(en):
        for p, paragraph in enumerate(article["paragraphs"]):
            key = f"xquad-{a:02d}-{p:02d}"
            texts[key] = paragraph["context"]
            for asked in _asked(paragraph, limit):
                queries.append((asked["question"], key, "en"))
                queries.append((zh_question[asked["id"]], key, "zh-en"))
    return EvalSet("xquad", _as_files(texts), texts, _per_category(queries, limit))


def xquad_split(limit: int | None, root: Path = PUBLIC, per_language: int | None = None) -> EvalSet:
    """XQuAD as a two-language knowledge base: the paragraphs of even-numbered articles in English,
    those of odd-numbered ones in Chinese (each paragraph once, in one language), and every question
    in both languages: ``en-en`` and ``zh-zh`` ask in the paragraph's language, ``zh-en`` and
    ``en-zh`` in the other. Language centring is measured here on public text. ``per_language``:
    only the first paragraph of that many articles a language (a small knowledge base)."""
    en, zh, zh_question = _xquad(root)
    texts, queries = {}, []
    for a, (article, translated) in enumerate(zip(en, zh, strict=True)):
        language = "en" if a % 2 == 0 else "zh"
        if per_language is not None and a // 2 >= per_language:
            continue
        pairs = list(zip(article["paragraphs"], translated["paragraphs"], strict=True))
        for p, (paragraph, other) in enumerate(pairs[:1] if per_language is not None else pairs):
            key = f"xquad-split-{a:02d}-{p:02d}"
            texts[key] = (paragraph if language == "en" else other)["context"]
            for asked in _asked(paragraph, limit):
                queries.append((asked["question"], key, f"en-{language}"))
                queries.append((zh_question[asked["id"]], key, f"zh-{language}"))
    name = "xquad-split" if per_language is None else f"xquad-split-small{per_language}"
    return EvalSet(name, _as_files(texts), texts, _per_category(queries, limit))


def korquad(limit: int | None, root: Path = PUBLIC) -> EvalSet:
    """The paragraphs of every 8th article; ``limit`` as for :func:`xquad` (None: every question)."""
    texts, queries = {}, []
    for a, article in enumerate(_squad(root / "korquad" / "KorQuAD_v1.0_dev.json")):
        if a % 8:
            continue
        for p, paragraph in enumerate(article["paragraphs"]):
            key = f"korquad-{a:03d}-{p:02d}"
            texts[key] = paragraph["context"]
            for asked in _asked(paragraph, limit):
                queries.append((asked["question"], key, "ko"))
    return EvalSet("korquad", _as_files(texts), texts, _per_category(queries, limit))


def ours(per_language: int | None = None) -> EvalSet:
    """Our evaluation set; ``per_language``: only the first documents of each language (a small
    knowledge base) and the questions about them."""
    keys = list(DOCUMENTS)
    if per_language is not None:
        by_language: dict[str, list[str]] = defaultdict(list)
        for key in keys:
            by_language[script_language(" ".join(DOCUMENTS[key][1]))].append(key)
        keys = [k for group in by_language.values() for k in group[:per_language]]
    built = our_files()
    texts = {k: "\n\n".join(DOCUMENTS[k][1]) for k in keys}
    queries = [(q, k, kind) for q, k, kind in QUESTIONS if k in texts]
    return EvalSet("ours" if per_language is None else f"ours-small{per_language}",
                   {k: built[k] for k in keys}, texts, queries)


def family() -> EvalSet:
    """The identifier family (near-identical documents that differ only in their identifiers), in a
    knowledge base of its own."""
    texts = {k: "\n\n".join(paragraphs) for k, (_, paragraphs) in FAMILY_DOCUMENTS.items()}
    return EvalSet("ours-family", our_files(FAMILY_DOCUMENTS), texts, list(FAMILY_QUESTIONS))


def _as_files(texts: dict[str, str]) -> dict[str, tuple[str, bytes]]:
    return {k: (f"{k}.txt", t.encode()) for k, t in texts.items()}


def _per_category(queries: list[tuple[str, str, str]], limit: int | None) -> list[tuple[str, str, str]]:
    """At most ``limit`` questions per category, spread evenly over the set (deterministic)."""
    if limit is None:
        return queries
    by: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for q in queries:
        by[q[2]].append(q)
    out = []
    for group in by.values():
        step = max(1, math.ceil(len(group) / limit))
        out.extend(group[::step][:limit])
    return out


def metrics(ranks: list[int | None]) -> dict[str, float]:
    """One relevant document per question: nDCG@10 = 1/log2(rank+1) within the top 10."""
    n = len(ranks)
    return {"ndcg10": sum(1 / math.log2(r + 1) for r in ranks if r and r <= 10) / n,
            "recall10": sum(1 for r in ranks if r and r <= 10) / n,
            "mrr10": sum(1 / r for r in ranks if r and r <= 10) / n,
            "top1": sum(1 for r in ranks if r == 1) / n, "n": n}


def by_category(s: EvalSet, ranks: list[int | None]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[int | None]] = defaultdict(list)
    for (_, _, category), rank in zip(s.queries, ranks, strict=True):
        groups[category].append(rank)
        groups["all"].append(rank)
    return {c: metrics(r) for c, r in groups.items()}


def report(set_name: str, system: str, scores: dict[str, dict[str, float]]) -> None:
    for category, m in sorted(scores.items()):
        print(f"RESULT public set={set_name} system={system} category={category} n={m['n']:.0f} "
              f"ndcg10={m['ndcg10']:.3f} recall10={m['recall10']:.3f} mrr10={m['mrr10']:.3f} top1={m['top1']:.3f}",
              flush=True)


def bm25(s: EvalSet, korean: KoreanMorphemes | None = None) -> list[int | None]:
    """``korean``: Hangul as that analyzer's morphemes (the product's ``korean_terms`` of a new
    knowledge base), else character bigrams."""
    import bm25s

    keys = list(s.texts)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index([terms(s.texts[k], korean) or ["∅"] for k in keys], show_progress=False)
    ranks: list[int | None] = []
    for question, relevant, _ in s.queries:
        tokens = terms(question, korean) or ["∅"]
        found, scores = retriever.retrieve([tokens], k=min(10, len(keys)), show_progress=False)
        ranked = [keys[int(i)] for i, score in zip(found[0], scores[0], strict=True) if score > 0]
        ranks.append(ranked.index(relevant) + 1 if relevant in ranked else None)
    return ranks


async def bare_model(container, kb: UUID, s: EvalSet) -> list[int | None]:
    """Brute-force cosine between the model's query and passage vectors of whole documents (the
    embedding cache serves documents that are one chunk)."""
    service = container.embedding.service
    keys = list(s.texts)
    docs = np.asarray(await service.embed_passages([s.texts[k] for k in keys], knowledge_base_id=kb), dtype=np.float32)
    ranks: list[int | None] = []
    for question, relevant, _ in s.queries:
        q = np.asarray(await service.embedder.embed_query(question), dtype=np.float32)
        order = list(np.argsort(-(docs @ q)))
        ranks.append(order.index(keys.index(relevant)) + 1)
    return ranks


async def ingest(container, s: EvalSet) -> tuple[UUID, dict[UUID, str]]:
    """The set's knowledge base, made and filled through the pipeline unless it is there already."""
    db = container.infra.db
    name = f"bench-{s.name}"
    row = await db.fetchone("SELECT id FROM knowledge_bases WHERE name = %s", (name,))
    if row is None:
        made = await container.ingest.knowledge_bases.create(name, "", KnowledgeBaseSettings())
        kb = made.id
        for filename, data in s.files.values():
            await container.ingest.ingestion.submit(made, filename, None, data)
        started = time.perf_counter()
        await container.worker(WorkerConfig(heartbeat_seconds=30)).run_until_idle()
        print(f"ingested {s.name}: {len(s.files)} documents in {time.perf_counter() - started:.0f}s", flush=True)
    else:
        kb = row["id"]
        waiting = await db.fetchone("SELECT count(*) AS n FROM documents WHERE knowledge_base_id = %s"
                                    " AND status <> 'READY'", (kb,))
        if waiting["n"]:  # a run stopped half-way
            await container.worker(WorkerConfig(heartbeat_seconds=30)).run_until_idle()
        while await container.maintenance.backfill.step():  # kept by an earlier version: catch up
            pass
    rows = await db.fetchall("SELECT id, filename, status FROM documents WHERE knowledge_base_id = %s", (kb,))
    by_filename = {filename: key for key, (filename, _) in s.files.items()}
    bad = [r["filename"] for r in rows if r["status"] != "READY"]
    if bad or len(rows) != len(s.files):
        raise SystemExit(f"{s.name}: {len(rows)} documents, not READY: {bad[:5]}")
    return kb, {r["id"]: by_filename[r["filename"]] for r in rows}


async def product(container, kb: UUID, key_of: dict[UUID, str], s: EvalSet, mode: SearchMode) -> list[int | None]:
    ranks: list[int | None] = []
    for question, relevant, _ in s.queries:
        results = await container.retrieval.search.search(kb, question, 10, mode=mode, group_by_document=True)
        ranked = [key_of.get(r.document_id) for r in results]
        ranks.append(ranked.index(relevant) + 1 if relevant in ranked else None)
    return ranks


def open_database(fresh: bool, work: Path) -> str:
    url, _ = start_embedded_postgres(work / "pg")
    with psycopg.connect(url, autocommit=True) as conn:
        if fresh:
            conn.execute("DROP DATABASE IF EXISTS bench_public")
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_public'").fetchone():
            conn.execute("CREATE DATABASE bench_public")
    db_url = make_conninfo(url, dbname="bench_public")
    migrate(db_url)
    return db_url


SWEEP = [(Fusion.WEIGHTED, FusionWeights(d, lx)) for d in (0.5, 0.6, 0.7) for lx in (0.0, 0.05, 0.1, 0.2, 0.3)]


async def run(args: argparse.Namespace) -> None:
    print(machine())
    url = open_database(args.fresh, args.work)
    settings = Settings(database_url=url, data_dir=args.work / "data", admin_key="bench-admin-key-0123456789",
                        query_cache_size=20_000)
    container = build(settings, url=url)
    await container.open()
    sets = [ours(), ours(per_language=6), family()] if args.ours else []
    sets += [load(args.limit or None, args.data) for name, folder, load in
             (("xquad", "xquad", xquad), ("xquad-split", "xquad", xquad_split),
              ("xquad-split-small", "xquad", partial(xquad_split, per_language=8)), ("korquad", "korquad", korquad))
             if (args.data / folder).is_dir() and name in args.sets.split(",")]
    try:
        for s in sets:
            kb, key_of = await ingest(container, s)
            report(s.name, "bm25", by_category(s, bm25(s)))
            report(s.name, "bm25-korean-morphemes", by_category(s, bm25(s, container.embedding.korean)))
            report(s.name, "bare-model", by_category(s, await bare_model(container, kb, s)))
            search = container.retrieval.search
            default = (search.fusion, search.weights)
            for mode in MODES:
                report(s.name, mode.value, by_category(s, await product(container, kb, key_of, s, mode)))
            await variants(container, kb, key_of, s)
            # before 2026-12-04: no centred query's candidate search; each chunk shifted by its
            # language's mean offset, not its own language component (its coordinates left unread)
            await switched_off(container, kb, key_of, s, "_across_languages", "no-centred-search", [])
            await switched_off(container, kb, key_of, s, "_coordinates", "language-offsets", {})
            grid = [(Fusion.WEIGHTED, FusionWeights(float(d), float(lx))) for d, lx in
                    (pair.split(":") for pair in args.weights.split(",") if pair)] if args.weights else SWEEP
            if args.strengths:
                await strengths(container, kb, key_of, s, args.strengths)
            for fusion, weights in [*grid, (Fusion.RRF, default[1])] if args.sweep else []:
                search.fusion, search.weights = fusion, weights
                label = "hybrid-rrf" if fusion is Fusion.RRF else f"hybrid-d{weights.dense}-l{weights.lexical}"
                report(s.name, label, by_category(s, await product(container, kb, key_of, s, SearchMode.HYBRID)))
            search.fusion, search.weights = default
    finally:
        await container.close()


async def variants(container, kb: UUID, key_of: dict[UUID, str], s: EvalSet) -> None:
    """The default hybrid without BM25 (dense and learned sparse at their shares, as before BM25
    came), and each without language centring."""
    search = container.retrieval.search
    weights, centroids = search.weights, search._centroids
    try:
        for label, lexical, centring in (("hybrid-no-bm25", 0.0, True), ("hybrid-no-centring", weights.lexical, False),
                                         ("hybrid-no-bm25-no-centring", 0.0, False)):
            search.weights = FusionWeights(weights.dense, lexical)
            search._centroids = centroids if centring else None
            report(s.name, label, by_category(s, await product(container, kb, key_of, s, SearchMode.HYBRID)))
    finally:
        search.weights, search._centroids = weights, centroids


async def switched_off(container, kb: UUID, key_of: dict[UUID, str], s: EvalSet, step: str, label: str,
                       nothing: object) -> None:
    """``dense`` and ``hybrid`` with one step of the search service (``step``, a method) answering
    ``nothing`` — reported as ``<mode>-<label>`` — and what that step costs a hybrid search: the
    median time with and without it, the set's first 300 questions alternated (query vectors
    cached: the search alone)."""
    search = container.retrieval.search
    own = getattr(search, step)

    async def off(*args: object, **kwargs: object) -> object:
        return nothing

    try:
        setattr(search, step, off)
        for mode in (SearchMode.DENSE, SearchMode.HYBRID):
            report(s.name, f"{mode.value}-{label}", by_category(s, await product(container, kb, key_of, s, mode)))
        timings: dict[str, list[float]] = {"with": [], "without": []}
        for question, _, _ in s.queries[:300]:
            for name, answer in (("with", own), ("without", off)):
                setattr(search, step, answer)
                started = time.perf_counter()
                await search.search(kb, question, 10, mode=SearchMode.HYBRID, group_by_document=True)
                timings[name].append(time.perf_counter() - started)
        with_ms, without_ms = (statistics.median(timings[k]) * 1000 for k in ("with", "without"))
        print(f"RESULT public set={s.name} cost step={step} mode=hybrid n={len(timings['with'])} "
              f"p50_with_ms={with_ms:.1f} p50_without_ms={without_ms:.1f} ratio={with_ms / without_ms:.2f}", flush=True)
    finally:
        setattr(search, step, own)


async def strengths(container, kb: UUID, key_of: dict[UUID, str], s: EvalSet, grid: str) -> None:
    """Every mode at each language-centring strength of ``grid`` ("dense:sparse,..."): how much of
    each language's measured bias to take off (domain/search.py ``CentringStrength``)."""
    centroids = container.retrieval.search._centroids
    if centroids is None:
        return
    default = centroids.strength
    try:
        for pair in grid.split(","):
            d, sp = (float(x) for x in pair.split(":"))
            centroids.strength = CentringStrength(d, sp)
            for mode in MODES:
                report(s.name, f"{mode.value}-centring-d{d:g}-s{sp:g}",
                       by_category(s, await product(container, kb, key_of, s, mode)))
    finally:
        centroids.strength = default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", type=Path, default=PUBLIC,
                        help="where the knowledge bases are kept between runs (<work>/pg, <work>/data)")
    parser.add_argument("--data", type=Path, default=PUBLIC,
                        help="the folder holding the prepared public sets (<set>/ as bench/public_sets.json says)")
    parser.add_argument("--sweep", action="store_true", help="hybrid at several fusion weights, and RRF")
    parser.add_argument("--fresh", action="store_true", help="start the kept knowledge bases over")
    parser.add_argument("--limit", type=int, default=150,
                        help="questions per category of a public set, each paragraph's first (0: every question)")
    parser.add_argument("--sets", default="xquad,xquad-split,xquad-split-small,korquad",
                        help="public sets to run (comma-separated)")
    parser.add_argument("--no-ours", dest="ours", action="store_false", help="skip our own set")
    parser.add_argument("--strengths", default="",
                        help="language centring's dense:sparse strengths to sweep (e.g. 1:1,0.5:1,0.5:0.5)")
    parser.add_argument("--weights", default="", help="the sweep's dense:lexical weights (e.g. 0.6:0.1,0.6:0.2)")

"""Search (SPEC §10, docs/search.md): embed the query (dense and learned sparse, a small LRU in
front) and weigh its BM25 terms by the knowledge base's document frequencies, ask the index for
candidates of the knowledge base restricted by the filters inside its query, fuse dense, learned
sparse and BM25 per chunk after language centring, then keep only chunks whose document
PostgreSQL says is READY and passes the filters — even if a crashed worker left vectors behind (the
double filter). Over-fetches until top_k results survive or the index has nothing more. A query
naming an identifier goes through the identifier stage too (identifier_stage.py): its chunks are
candidates, and rank first; the optional reranker orders within that tier."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from ..domain.embedding_models import IndexPlan
from ..domain.errors import GenerationGone, InvalidRequestError, TransientError
from ..domain.identifiers import IdentifierHits, QueryIdentifier, identifier_tier, spans_of
from ..domain.lexical import KoreanMorphemes, LexicalQuery, has_hangul, korean_of, lexical_query, query_indexes
from ..domain.models import SearchOutcome, SearchResult, SourceLocator
from ..domain.ports import (
    CentroidStore,
    Embedder,
    IdentifierIndex,
    IndexRouter,
    LexicalStatistics,
    PairedQueries,
    ReadyChunks,
    Reranker,
    SearchTimings,
    SparseEncoder,
    SparseVector,
)
from ..domain.search import (
    Fusion,
    FusionWeights,
    Highlighter,
    LanguageOffsets,
    QueryVectors,
    ScoredChunk,
    SearchFilters,
    SearchMode,
    centre_lexical,
    fuse,
    glob_to_regex,
    highlighter,
    script_language,
)
from ..offload import run_sized
from .embedding.models import EmbeddingModels
from .identifier_stage import IdentifierStage

MAX_FETCH = 16384
MIN_CANDIDATES = 50  # per side: language centring can lift a chunk that raw similarity ranks lower
# A language's mean says "this language" only over enough chunks; over a handful it is their content,
# and centring on it would cancel exactly the similarity that matters.
MIN_LANGUAGE_CHUNKS = 10


CacheKey = tuple[UUID, str, str]  # (knowledge base, kind of vector and model, query)


class QueryCache:
    """Per process, bounded, least recently used: a repeated query is not embedded again. Keyed by
    knowledge base too: a hit is faster than a miss, and that difference must not tell one
    knowledge base's readers which queries another's asked."""

    def __init__(self, size: int) -> None:
        self._size = max(0, size)
        self._items: OrderedDict[CacheKey, tuple[float, ...] | SparseVector] = OrderedDict()

    def get(self, key: CacheKey) -> Any:  # a dense vector or a sparse one, as the key's kind says
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: CacheKey, value: tuple[float, ...] | SparseVector) -> None:
        if not self._size:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


async def _no_hits() -> IdentifierHits:
    return IdentifierHits()


class SearchService:
    def __init__(self, *, vectors: IndexRouter, models: EmbeddingModels, documents: ReadyChunks,
                 max_top_k: int, max_query_chars: int, sparse: SparseEncoder | None = None,
                 fusion: Fusion = Fusion.WEIGHTED, weights: FusionWeights | None = None, query_cache_size: int = 1024,
                 metrics: SearchTimings | None = None, centroids: CentroidStore | None = None,
                 identifiers: IdentifierIndex | None = None, lexical: LexicalStatistics | None = None,
                 reranker: Reranker | None = None, rerank_candidates: int = 30,
                 korean: KoreanMorphemes | None = None) -> None:
        """``vectors``: the index generations router (candidates from the generation of the plan a
        search read); ``models``: the query is embedded with that generation's own model;
        ``identifiers``: the identifier index (None: no identifier stage); ``lexical``: the
        knowledge bases' BM25 statistics (None: no BM25 side); ``reranker``: the optional
        cross-encoder that re-scores the top ``rerank_candidates`` results; ``korean``: BM25's
        Korean analyzer, for the knowledge bases whose ``korean_terms`` asks for it."""
        self._vectors = vectors
        self._models = models
        self._sparse = sparse
        # the local model beside its own sparse head: a query's two vectors from one pass
        self._pairs: PairedQueries | None = sparse if isinstance(sparse, PairedQueries) else None
        self._documents = documents
        self._max_top_k = max_top_k
        self._max_query_chars = max_query_chars
        self.fusion = fusion
        self.weights = weights or FusionWeights()
        self._cache = QueryCache(query_cache_size)
        self.metrics = metrics
        self._centroids = centroids
        self._identifiers = IdentifierStage(identifiers) if identifiers is not None else None
        self._lexical = lexical
        self._korean = korean
        self._korean_terms: dict[UUID, str] = {}  # fixed for a knowledge base's life: read once
        self.reranker = reranker
        self._rerank_candidates = rerank_candidates

    async def search(self, knowledge_base_id: UUID, query: str, top_k: int, *,
                     mode: SearchMode = SearchMode.HYBRID, filters: SearchFilters | None = None,
                     min_score: float | None = None, group_by_document: bool = False) -> list[SearchResult]:
        return (await self.search_outcome(knowledge_base_id, query, top_k, mode=mode, filters=filters,
                                          min_score=min_score, group_by_document=group_by_document)).results

    async def search_outcome(self, knowledge_base_id: UUID, query: str, top_k: int, *,
                             mode: SearchMode = SearchMode.HYBRID, filters: SearchFilters | None = None,
                             min_score: float | None = None, group_by_document: bool = False) -> SearchOutcome:
        """``search``, with the identifiers the query names that no chunk it could return holds."""
        query = query.strip()
        if not query:
            raise InvalidRequestError("the query is empty")
        if len(query) > self._max_query_chars:
            raise InvalidRequestError(f"the query is longer than {self._max_query_chars} characters")
        if not 1 <= top_k <= self._max_top_k:
            raise InvalidRequestError(f"top_k must be between 1 and {self._max_top_k}")
        if mode is SearchMode.SPARSE and self._sparse is None:
            raise InvalidRequestError("sparse search is not available: no sparse encoder is configured")
        if filters is not None and filters.filename is not None:
            try:
                glob_to_regex(filters.filename)  # bounded: too many wildcards are refused
            except ValueError as exc:
                raise InvalidRequestError(str(exc)) from exc
        effective = mode if self._sparse is not None or self._lexical is not None else SearchMode.DENSE
        asked = self._identifiers.asked(query) if self._identifiers is not None else []
        started = time.perf_counter()
        wanted = max(top_k, self._rerank_candidates) if self.reranker is not None else top_k
        for _ in range(3):  # a switch between reading the plan and the index: read it again
            plan, embedder = await self._index_of(knowledge_base_id)
            vectors = await self._query_vectors(knowledge_base_id, query, effective, embedder)
            try:
                results = await self._collect(knowledge_base_id, query, vectors, wanted, effective,
                                              filters or SearchFilters(), min_score, group_by_document, plan, embedder,
                                              asked)
                break
            except GenerationGone:
                continue
        else:
            raise TransientError("the knowledge base is switching embedding models; try again", service="search")
        if self.reranker is not None:
            results = replace(results, results=await rerank(self.reranker, query, results.results))
        results = replace(results, results=results.results[:top_k])
        if self.metrics is not None:
            self.metrics.observe(mode.value, time.perf_counter() - started)
        return results

    async def _index_of(self, knowledge_base_id: UUID) -> tuple[IndexPlan, Embedder]:
        """The generation search reads and the model of its vectors, read on every search: after a
        migration's switch the next search uses the new model."""
        plan = await self._vectors.plan(knowledge_base_id)
        return plan, self._models.embedder(plan.current.spec)

    async def _query_vectors(self, knowledge_base_id: UUID, query: str, mode: SearchMode,
                             embedder: Embedder) -> QueryVectors:
        """The query's dense and learned sparse vectors and its BM25 terms, computed at once."""
        dense_key = (knowledge_base_id, f"dense:{embedder.name}", query)
        sparse_key = (knowledge_base_id, "sparse", query)
        dense = self._cache.get(dense_key)
        sparse: SparseVector | None = self._cache.get(sparse_key) if mode is not SearchMode.DENSE else {}
        pairs = self._pairs if dense is None and sparse is None else None
        jobs: list[Awaitable[Any]] = []
        if pairs is not None and pairs.pairs_with(embedder):
            jobs.append(pairs.encode_query_pair(query))  # both from one pass
        else:
            pairs = None
            if dense is None:
                jobs.append(embedder.embed_query(query))
            if sparse is None and self._sparse is not None:
                jobs.append(self._sparse.encode_query(query))
        lexical = self._lexical_query(knowledge_base_id, query) if mode is not SearchMode.DENSE else None
        if lexical is not None:
            jobs.append(lexical)
        done = list(await asyncio.gather(*jobs))
        if pairs is not None:
            dense_list, sparse = done.pop(0)
            dense = tuple(dense_list)
            self._cache.put(dense_key, dense)
            self._cache.put(sparse_key, sparse)
        if dense is None:
            dense = tuple(done.pop(0))
            self._cache.put(dense_key, dense)
        if sparse is None:
            sparse = done.pop(0) if self._sparse is not None else {}
            self._cache.put(sparse_key, sparse)
        return QueryVectors(dense=dense, sparse=sparse or {}, lexical=done.pop(0) if lexical is not None else None)

    def _lexical_query(self, knowledge_base_id: UUID, query: str) -> Awaitable[LexicalQuery | None] | None:
        """The query's BM25 terms weighted by their IDF in the knowledge base (a read of its
        statistics); None without a lexical side."""
        if self._lexical is None:
            return None
        statistics = self._lexical

        async def weigh() -> LexicalQuery | None:
            korean = None
            if self._korean is not None and has_hangul(query):
                korean = korean_of(await self._korean_terms_of(statistics, knowledge_base_id), self._korean)
            indexes = (await asyncio.to_thread(query_indexes, knowledge_base_id, query, korean) if korean
                       else query_indexes(knowledge_base_id, query))  # the analyzer's first use loads it
            if not indexes:
                return None
            chunks, frequencies = await statistics.statistics(knowledge_base_id, indexes)
            return lexical_query(indexes, chunks, frequencies)
        return weigh()

    async def _korean_terms_of(self, statistics: LexicalStatistics, knowledge_base_id: UUID) -> str:
        known = self._korean_terms.get(knowledge_base_id)
        if known is None:
            known = await statistics.korean_terms(knowledge_base_id)
            if len(self._korean_terms) >= 100_000:  # bounded: forget all, read again
                self._korean_terms.clear()
            self._korean_terms[knowledge_base_id] = known
        return known

    async def _collect(self, knowledge_base_id: UUID, query: str, vectors: QueryVectors, top_k: int, mode: SearchMode,
                       filters: SearchFilters, min_score: float | None, group: bool, plan: IndexPlan,
                       embedder: Embedder, asked: list[QueryIdentifier]) -> SearchOutcome:
        fetch = max(MIN_CANDIDATES, top_k * (4 if group else 2))
        offsets = await self._offsets(knowledge_base_id, query, vectors, embedder)
        stage = self._identifiers
        marks = highlighter(query)
        while True:
            (found, exhausted), hits, across = await asyncio.gather(
                self._vectors.candidates(knowledge_base_id, vectors, fetch, mode=mode, filters=filters, plan=plan),
                stage.lookup(knowledge_base_id, asked, filters, fetch) if stage is not None else _no_hits(),
                self._across_languages(knowledge_base_id, offsets, fetch, mode, filters, plan))
            named = stage.named(found, hits) if stage is not None else []
            found = await self._with_scored(knowledge_base_id, vectors, found, [*named, *across], mode, plan)
            if mode is SearchMode.SPARSE:
                found = [c for c in found if c.sparse > 0 or c.lexical > 0 or c.chunk_id in hits.chunks]
            dense_of = {c.chunk_id: c.dense for c in found}
            coordinates, ready = await asyncio.gather(  # both by id, at once
                self._coordinates(knowledge_base_id, offsets, found, mode, plan),
                self._documents.ready_chunks(knowledge_base_id, [c.chunk_id for c in found], filters))
            rows = {r["id"]: r for r in ready}
            # centring, fusion, the identifier tier and highlights scan every row's text: in a thread
            # when that is much text, so the event loop (every other request of this process) never waits
            size = sum(len(r["content"]) for r in rows.values())
            ranked, results, held = await run_sized(size, self._rank, found, rows, offsets, coordinates, mode, marks,
                                                    top_k, min_score, group, dense_of, asked)
            below = min_score is not None and ranked and ranked[-1][1] < min_score
            if len(results) >= top_k or exhausted or below or fetch >= MAX_FETCH:
                unmatched = stage.unmatched(asked, hits, held) if stage is not None else ()
                return SearchOutcome(results, unmatched)
            fetch = min(fetch * 4, MAX_FETCH)

    async def _offsets(self, knowledge_base_id: UUID, query: str, vectors: QueryVectors,
                       embedder: Embedder) -> LanguageOffsets | None:
        """Language centring (domain/search.py): None when the knowledge base has one language."""
        if self._centroids is None:
            return None
        return await self._centroids.offsets(knowledge_base_id, embedder.name, vectors, min_chunks=MIN_LANGUAGE_CHUNKS,
                                             language=script_language(query))

    async def _across_languages(self, knowledge_base_id: UUID, offsets: LanguageOffsets | None, fetch: int,
                                mode: SearchMode, filters: SearchFilters, plan: IndexPlan) -> list[UUID]:
        """The centred query's nearest chunks (``LanguageOffsets.centred_query``), under the same
        filters: candidates in the other languages that the plain dense search ranks too low to
        return. Nothing in ``sparse`` mode (no dense side) or a one-language knowledge base."""
        if offsets is None or offsets.centred_query is None or mode is SearchMode.SPARSE:
            return []
        found, _ = await self._vectors.candidates(knowledge_base_id, QueryVectors(dense=offsets.centred_query), fetch,
                                                  mode=SearchMode.DENSE, filters=filters, plan=plan)
        return [c.chunk_id for c in found]

    async def _coordinates(self, knowledge_base_id: UUID, offsets: LanguageOffsets | None, found: list[ScoredChunk],
                           mode: SearchMode, plan: IndexPlan) -> dict[UUID, list[float]]:
        """Each candidate's dense vector along the languages' directions
        (``LanguageOffsets.directions``): its similarity to each, read from the store by id (one
        read a direction, at once). Empty in ``sparse`` mode or a one-language knowledge base."""
        if offsets is None or not offsets.directions or mode is SearchMode.SPARSE or not found:
            return {}
        ids = [c.chunk_id for c in found]
        reads = await asyncio.gather(*(self._vectors.scored(knowledge_base_id, QueryVectors(dense=d), ids,
                                                            mode=SearchMode.DENSE, plan=plan)
                                       for d in offsets.directions))
        along = [{c.chunk_id: c.dense for c in read} for read in reads]
        return {i: [a[i] for a in along] for i in ids if all(i in a for a in along)}

    async def _with_scored(self, knowledge_base_id: UUID, vectors: QueryVectors, found: list[ScoredChunk],
                           more: list[UUID], mode: SearchMode, plan: IndexPlan) -> list[ScoredChunk]:
        """``found`` and the chunks of ``more`` it lacks (named by an identifier, found by the centred
        query), scored as the query's own candidates are, in one read."""
        have = {c.chunk_id for c in found}
        missing = [c for c in dict.fromkeys(more) if c not in have]
        if not missing:
            return found
        return found + await self._vectors.scored(knowledge_base_id, vectors, missing, mode=mode, plan=plan)

    def _rank(self, found: list[ScoredChunk], rows: dict[UUID, dict[str, Any]], offsets: LanguageOffsets | None,
              coordinates: dict[UUID, list[float]], mode: SearchMode, marks: Highlighter, top_k: int,
              min_score: float | None, group: bool,
              dense_of: dict[UUID, float], asked: list[QueryIdentifier],
              ) -> tuple[list[tuple[UUID, float]], list[SearchResult], dict[UUID, tuple[str, ...]]]:
        """Centring, fusion, the identifier tier and the results with their highlights: the ranked
        candidates, the results, and the query's identifiers each chunk holds."""
        if offsets is not None:  # a multilingual knowledge base: centre every signal on its language
            languages = [(c, script_language(rows[c.chunk_id]["content"])) for c in found if c.chunk_id in rows]
            found = centre_lexical([(offsets.apply(c, language, coordinates.get(c.chunk_id)), language)
                                    for c, language in languages])
        ranked = fuse(found, mode, fusion=self.fusion,
                      weights=self.weights if offsets is None else self.weights.multilingual())
        held = self._identifiers.held(asked, rows) if self._identifiers is not None else {}
        results = self._assemble(identifier_tier(ranked, {c: len(n) for c, n in held.items()}), rows, marks, top_k,
                                 min_score, group, dense_of, held, {a.text: a.key for a in asked})
        return ranked, results, held

    @staticmethod
    def _assemble(ranked: Sequence[tuple[UUID, float]], rows: dict[UUID, dict[str, Any]], marks: Highlighter,
                  top_k: int, min_score: float | None, group: bool, dense_of: dict[UUID, float],
                  held: dict[UUID, tuple[str, ...]], key_of: dict[str, str]) -> list[SearchResult]:
        results: list[SearchResult] = []
        seen: set[UUID] = set()
        for chunk_id, score in ranked:
            row = rows.get(chunk_id)
            if row is None or (min_score is not None and score < min_score):
                continue
            if group:  # a document ranks by its best chunk, and appears once
                if row["document_id"] in seen:
                    continue
                seen.add(row["document_id"])
            names = held.get(chunk_id, ())
            exact = spans_of(row["content"], [key_of[n] for n in names]) if names else []
            results.append(SearchResult(
                chunk_id=chunk_id, document_id=row["document_id"], filename=row["filename"],
                content=row["content"], score=score, heading_path=tuple(row["heading_path"] or ()),
                locator=SourceLocator.from_metadata(row["locator"]),
                assets=tuple(row["metadata"].get("assets", ())) if row["metadata"] else (),
                highlights=tuple(marks(row["content"], also=exact)), dense_score=dense_of.get(chunk_id),
                identifiers=names, metadata=row.get("document_metadata") or {},
            ))
            if len(results) == top_k:
                break
        return results


async def rerank(reranker: Reranker, query: str, results: list[SearchResult]) -> list[SearchResult]:
    """The cross-encoder's order and scores (its relevance, which ``score`` then is) within each
    identifier tier: a result holding more of the query's identifiers stays above one holding
    fewer, whatever the reranker says (identifier exactness first, docs/search.md)."""
    if not results:
        return results
    scores = await reranker.rerank(query, [r.content for r in results])
    rescored = [replace(r, score=score) for r, score in zip(results, scores, strict=True)]
    order = sorted(range(len(rescored)), key=lambda i: (-len(results[i].identifiers), -rescored[i].score, i))
    return [rescored[i] for i in order]

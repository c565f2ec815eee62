"""The retrieval feature: search (the query embedded with each knowledge base's model, candidates
from its index generation, the double filter) and grounded answers on top of it."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapter_factories import make_chat_model, make_reranker
from ..domain.ports import ChatModel, IdentifierIndex, ReadyChunks
from ..domain.search import Fusion, FusionWeights
from ..observability import AnswerMetrics, SearchMetrics
from ..services.answering import AnswerConfig, AnswerService
from ..services.search import SearchService
from ..settings import Settings
from .embedding import EmbeddingFeature


@dataclass
class RetrievalFeature:
    search: SearchService
    search_metrics: SearchMetrics  # this process's search latency, served at /metrics
    answers: AnswerService

    @property
    def answer_metrics(self) -> AnswerMetrics:
        return self.answers.metrics


def make_answers(settings: Settings, search: SearchService, chat: ChatModel | None = None,
                 metrics: AnswerMetrics | None = None) -> AnswerService:
    from ..adapters.embedders.openai import estimate_tokens  # the model's tokenizer is not at hand: estimate

    metrics = metrics or AnswerMetrics()
    config = AnswerConfig(min_score=settings.answer_min_score, context_tokens=settings.llm_context_tokens,
                          history_tokens=settings.llm_history_tokens, max_output_tokens=settings.llm_max_output_tokens,
                          max_query_chars=settings.max_query_chars, max_answer_bytes=settings.llm_max_answer_bytes,
                          max_answer_seconds=settings.llm_max_answer_seconds)
    return AnswerService(search=search, chat=chat or make_chat_model(settings, metrics), config=config,
                         count_tokens=estimate_tokens, metrics=metrics)


def wire(settings: Settings, embedding: EmbeddingFeature, documents: ReadyChunks,
         chat: ChatModel | None = None, identifiers: IdentifierIndex | None = None) -> RetrievalFeature:
    """``documents``: PostgreSQL's side of the double filter (the ingest feature's repository);
    ``identifiers``: the identifier index beside the chunks."""
    metrics = SearchMetrics()
    search = SearchService(vectors=embedding.indexes, models=embedding.models, documents=documents,
                           sparse=embedding.sparse, max_top_k=settings.max_search_top_k,
                           max_query_chars=settings.max_query_chars, fusion=Fusion(settings.search_fusion),
                           weights=FusionWeights(settings.search_dense_weight, settings.search_lexical_weight),
                           query_cache_size=settings.query_cache_size, metrics=metrics, centroids=embedding.centroids,
                           identifiers=identifiers,
                           lexical=embedding.indexes.sparse.lexical if settings.search_lexical_weight > 0 else None,
                           reranker=make_reranker(settings), rerank_candidates=settings.rerank_candidates,
                           korean=embedding.korean)
    return RetrievalFeature(search=search, search_metrics=metrics, answers=make_answers(settings, search, chat))

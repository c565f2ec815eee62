"""One factory per port: which adapter implements it, chosen from the settings (storage, dense
embedder, sparse encoder, embedding engine, vector store, parse limits, image describer, chat model).
The composition root (``bootstrap.build``) wires what these return; nothing here connects."""

from __future__ import annotations

from uuid import UUID

from .adapters.embedders.local import LocalE5Embedder
from .adapters.embedders.sparse import LocalSparseEncoder
from .adapters.parsers.limits import ParseLimits
from .adapters.postgres.database import Database
from .adapters.storage.local import LocalObjectStorage
from .adapters.vectors.generations import GenerationStore, generation_prefix, generation_table
from .adapters.vectors.pgvector import PgVectorStore
from .domain.embedding_models import EmbeddingSpec
from .domain.ports import (
    ChatModel,
    Embedder,
    ImageDescriber,
    ObjectStorage,
    Reranker,
    SparseEncoder,
    StreamingEmbedder,
    VectorStore,
)
from .observability import AnswerMetrics
from .settings import Settings


def make_storage(settings: Settings) -> ObjectStorage:
    if settings.storage_url and settings.storage_url.startswith("s3://"):
        from .adapters.storage.s3 import S3ObjectStorage

        return S3ObjectStorage.from_url(
            settings.storage_url, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region,
            access_key_id=settings.s3_access_key_id, secret_access_key=settings.s3_secret_access_key,
            max_attempts=settings.s3_max_attempts, connect_timeout=settings.s3_connect_timeout_seconds,
            read_timeout=settings.s3_read_timeout_seconds, multipart_threshold=settings.s3_multipart_threshold_bytes,
            part_size=settings.s3_part_size_bytes)
    if settings.storage_url and not settings.storage_url.startswith("file://"):
        raise ValueError(f"unsupported storage URL {settings.storage_url!r}: use file:///path or s3://bucket/prefix")
    return LocalObjectStorage(settings.objects_dir)


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "openai":
        from .adapters.embedders.openai import OpenAICompatibleEmbedder

        return OpenAICompatibleEmbedder(
            base_url=settings.embedding_base_url or "", model=settings.embedding_model or "",
            dimension=settings.embedding_dimensions or 0, api_key=settings.embedding_api_key,
            send_dimensions=settings.embedding_send_dimensions, max_tokens=settings.embedding_max_tokens,
            batch_size=settings.embedding_request_batch_size, max_concurrency=settings.embedding_max_concurrency,
            connect_timeout=settings.embedding_connect_timeout_seconds, timeout=settings.embedding_timeout_seconds,
            max_retries=settings.embedding_max_retries, input_type_field=settings.embedding_input_type_field)
    if settings.embedder != "local":
        raise ValueError(f"unsupported embedder {settings.embedder!r}: 'local' or 'openai'")
    from .adapters.embedders.local import LocalE5Embedder

    return LocalE5Embedder(batch_size=settings.local_embed_micro_batch,
                           query_concurrency=settings.embed_query_concurrency, single_pass=settings.embed_single_pass)


def make_embedder_for(settings: Settings, spec: EmbeddingSpec, local: Embedder | None = None) -> Embedder:
    """A knowledge base's embedder (services/embedding/models.py builds each once per process):
    the local model (one instance per process: ``local`` when it is already loaded), or the
    OpenAI-compatible server of the settings with the knowledge base's model and dimension."""
    if spec.embedder == "local":
        return local if local is not None else make_embedder(settings.model_copy(update={"embedder": "local"}))
    return make_embedder(settings.model_copy(update={
        "embedder": "openai", "embedding_model": spec.model, "embedding_dimensions": spec.dimension}))


def make_generation_store(settings: Settings, db: Database, spec: EmbeddingSpec, generation: int,
                          kb_id: UUID) -> GenerationStore:
    """The dense store of one index generation (adapters/vectors/generations.py): generation 0 is
    the model's shared index; a migration's generation is a table or collection of its own."""
    if settings.vector_store == "pgvector":
        return PgVectorStore(db, spec.dimension, table=generation_table(kb_id, generation) if generation else None,
                             with_sparse=False)
    prefix = generation_prefix(kb_id, generation) if generation else "urag"
    return _collection_store(settings, spec.dimension, spec.model, prefix)


def make_sparse_encoder(settings: Settings, embedder: Embedder) -> LocalSparseEncoder | None:
    """The local model's sparse head, whatever computes the dense vectors (one copy of the weights
    when the local model is also the dense embedder)."""
    if not settings.sparse_enabled:
        return None
    local = embedder if isinstance(embedder, LocalE5Embedder) else None
    return LocalSparseEncoder(top_k=settings.sparse_top_k, loader=local.model if local is not None else None,
                              query_concurrency=settings.embed_query_concurrency, dense=local)


def make_engine(settings: Settings, embedder: Embedder,
                sparse: LocalSparseEncoder | None) -> tuple[StreamingEmbedder, SparseEncoder | None]:
    """The process's embedding engine around one embedder (and its sparse encoder): documents of
    every job go through one queue, batched across jobs (``adapters/embedders/batch_engine.py``). Every
    embedder the services get is behind one: the embedding service streams from it."""
    from .adapters.embedders.engine_embedders import apply_engine
    from .adapters.embedders.model_threads import default_copies, default_threads
    threads = settings.embed_threads or default_threads()
    return apply_engine(embedder, sparse, threads=threads,
                        local_batch=settings.local_embed_micro_batch,
                        remote_batch=settings.embedding_request_batch_size,
                        max_in_flight=settings.embedding_max_concurrency,
                        max_wait=settings.embed_batch_wait_seconds,
                        copies=settings.embed_model_copies or default_copies(threads))


def make_vector_store(settings: Settings, db: Database, dimension: int, model: str = "default") -> VectorStore:
    if settings.vector_store in ("milvus", "qdrant"):
        return _collection_store(settings, dimension, model, "urag")
    if settings.vector_store != "pgvector":
        raise ValueError(f"unsupported vector store {settings.vector_store!r}: 'pgvector', 'milvus' or 'qdrant'")
    return PgVectorStore(db, dimension)


def _collection_store(settings: Settings, dimension: int, model: str, collection_prefix: str) -> GenerationStore:
    """A Milvus or Qdrant collection (the dense side: the sparse one stays in PostgreSQL)."""
    if settings.vector_store == "milvus":
        from .adapters.vectors.milvus import MilvusVectorStore

        if not settings.milvus_uri:
            raise ValueError("ULTIMATE_RAG_VECTOR_STORE=milvus needs ULTIMATE_RAG_MILVUS_URI")
        return MilvusVectorStore(uri=settings.milvus_uri, token=settings.milvus_token, dimension=dimension,
                                 model=model, consistency_level=settings.milvus_consistency_level,
                                 batch_size=settings.milvus_batch_size, num_partitions=settings.milvus_num_partitions,
                                 timeout=settings.milvus_timeout_seconds, collection_prefix=collection_prefix)
    if settings.vector_store == "qdrant":
        from .adapters.vectors.qdrant import QdrantVectorStore

        return QdrantVectorStore(url=settings.qdrant_url, api_key=settings.qdrant_api_key, path=settings.qdrant_path,
                                 dimension=dimension, model=model, batch_size=settings.qdrant_batch_size,
                                 timeout=settings.qdrant_timeout_seconds, collection_prefix=collection_prefix)
    raise ValueError(f"unsupported vector store {settings.vector_store!r}: 'pgvector', 'milvus' or 'qdrant'")


def parse_limits(settings: Settings) -> ParseLimits:
    return ParseLimits(max_pages=settings.parse_max_pages, max_image_pixels=settings.parse_max_image_pixels,
                       max_image_bytes=settings.parse_max_image_bytes, max_asset_bytes=settings.parse_max_asset_bytes,
                       max_assets=settings.parse_max_assets,
                       max_archive_bytes=settings.parse_max_archive_bytes,
                       max_archive_entries=settings.parse_max_archive_entries,
                       max_html_depth=settings.parse_max_html_depth, max_text_chars=settings.parse_max_text_chars,
                       max_sheets=settings.parse_max_sheets, max_cells=settings.parse_max_cells, ocr=settings.ocr,
                       max_ocr_pages=settings.parse_max_ocr_pages, pdf_engine=settings.pdf_engine)


def make_vision(settings: Settings) -> ImageDescriber | None:
    """The image describer, or None: then alt text, captions and figure labels describe images."""
    if not settings.vision_base_url or not settings.vision_model:
        return None
    from .adapters.vision import OpenAICompatibleVision

    return OpenAICompatibleVision(settings.vision_base_url, settings.vision_model, settings.vision_api_key,
                                  timeout=settings.vision_timeout_seconds)


def make_chat_model(settings: Settings, metrics: AnswerMetrics | None = None) -> ChatModel | None:
    """The chat model of grounded answers, or None: then answers are the cited passages alone."""
    if not settings.llm_base_url or not settings.llm_model:
        return None
    from .adapters.llm import OpenAICompatibleChat, is_local_endpoint, provider_timeout

    return OpenAICompatibleChat(
        base_url=settings.llm_base_url, model=settings.llm_model, api_key=settings.llm_api_key,
        connect_timeout=settings.llm_connect_timeout_seconds,
        timeout=provider_timeout(settings.llm_base_url, settings.llm_timeout_seconds),
        retry_timeouts=not is_local_endpoint(settings.llm_base_url), max_retries=settings.llm_max_retries,
        max_retry_wait=settings.llm_max_retry_wait_seconds,
        temperature=settings.llm_temperature, on_error=metrics.provider_error if metrics else None)


def make_reranker(settings: Settings) -> Reranker | None:
    """The optional cross-encoder of search (None: results keep their fused order)."""
    if not settings.rerank_base_url or not settings.rerank_model:
        return None
    from .adapters.rerank.http import HttpReranker

    return HttpReranker(base_url=settings.rerank_base_url, model=settings.rerank_model,
                        api_key=settings.rerank_api_key, timeout=settings.rerank_timeout_seconds,
                        max_retries=settings.rerank_max_retries)

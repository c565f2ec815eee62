"""The composition root: the one place that turns settings into wired services. Nothing here runs
at import time; ``build`` is called by the API lifespan, the worker and the CLI."""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass
from typing import Any

from .adapter_factories import (
    make_chat_model,
    make_embedder,
    make_embedder_for,
    make_engine,
    make_generation_store,
    make_sparse_encoder,
    make_storage,
    make_vector_store,
    make_vision,
    parse_limits,
)
from .adapters.chunking.chunker import StructuredChunker
from .adapters.embedders.cache import EmbeddingCache
from .adapters.embedders.local import LocalE5Embedder
from .adapters.http.outbound import OutboundPolicy, SafeHttpClient
from .adapters.parsers.isolation import ParseRunner
from .adapters.parsers.registry import ParserRegistry, default_registry
from .adapters.postgres.api_keys import ApiKeyRepository
from .adapters.postgres.audit import AuditLog
from .adapters.postgres.centroids import LanguageCentroids
from .adapters.postgres.connector_syncs import SyncQueue
from .adapters.postgres.connectors import Connector, ConnectorRepository
from .adapters.postgres.database import Database
from .adapters.postgres.dedup import PostgresDedupStore
from .adapters.postgres.documents import DocumentRepository
from .adapters.postgres.embedded import start_embedded_postgres
from .adapters.postgres.embedding_migrations import EmbeddingMigrationRepository
from .adapters.postgres.events import DocumentEventHub
from .adapters.postgres.knowledge_bases import KnowledgeBaseRepository
from .adapters.postgres.lease_keeper import JobLeaseKeeping
from .adapters.postgres.lifecycle import KnowledgeBaseDeletionRepository, LifecycleRepository
from .adapters.postgres.maintenance import MaintenanceRepository, OperationsQueries
from .adapters.postgres.migrations import migrate
from .adapters.postgres.pipeline import PipelineRepository
from .adapters.postgres.queue import JobQueue, queue_database
from .adapters.snapshots.filesystem import FilesystemChunkSnapshotStore
from .adapters.vectors.generations import IndexGenerations
from .adapters.vectors.pgvector import PgVectorStore
from .adapters.vectors.sparse_pg import HybridVectors
from .domain.embedding_models import EmbeddingSpec
from .domain.ports import ChatModel, Embedder, ObjectStorage, VectorStore
from .domain.search import Fusion
from .observability import AnswerMetrics, SearchMetrics
from .services.answering import AnswerConfig, AnswerService
from .services.backfill import SparseBackfill
from .services.connectors.base import Source
from .services.connectors.runner import ConnectorServices, SyncRunner
from .services.connectors.sources import ConnectorLimits, build_source
from .services.connectors.sync import SyncService
from .services.dedup import Deduplicator
from .services.deletion import DocumentDeleter
from .services.embedding import EmbeddingService
from .services.embedding_migration import EmbeddingMigrations
from .services.embedding_models import EmbeddingModels
from .services.ingestion import IngestionService
from .services.janitor import Janitor
from .services.knowledge_base_removal import KnowledgeBaseRemoval
from .services.lifecycle import DocumentLifecycle
from .services.processing import DocumentProcessor
from .services.search import SearchService
from .services.worker import IngestionWorker, WorkerConfig
from .settings import Settings

log = logging.getLogger(__name__)
_embedded_servers: list[Any] = []


def database_url(settings: Settings) -> str:
    """The configured server, or the embedded PostgreSQL in the data dir (started on first use)."""
    if settings.database_url:
        return settings.database_url
    url, server = start_embedded_postgres(settings.data_dir, supervise=True)  # restarted if it dies
    _embedded_servers.append(server)  # keep the handle: the server lives while this process does
    return url


def make_answers(settings: Settings, search: SearchService, chat: ChatModel | None = None,
                 metrics: AnswerMetrics | None = None) -> AnswerService:
    from .adapters.embedders.openai import estimate_tokens  # the model's tokenizer is not at hand: estimate

    metrics = metrics or AnswerMetrics()
    config = AnswerConfig(min_score=settings.answer_min_score, context_tokens=settings.llm_context_tokens,
                          history_tokens=settings.llm_history_tokens, max_output_tokens=settings.llm_max_output_tokens,
                          max_query_chars=settings.max_query_chars)
    return AnswerService(search=search, chat=chat or make_chat_model(settings, metrics), config=config,
                         count_tokens=estimate_tokens, metrics=metrics)


@dataclass
class Container:
    settings: Settings
    db: Database
    knowledge_bases: KnowledgeBaseRepository
    documents: DocumentRepository
    queue: JobQueue
    pipeline: PipelineRepository  # the pipeline's fenced writes, on the queue's lease and pool
    storage: ObjectStorage
    snapshots: FilesystemChunkSnapshotStore
    embedder: Embedder
    embedding: EmbeddingService
    vectors: VectorStore
    parsers: ParserRegistry
    processor: DocumentProcessor
    ingestion: IngestionService
    search: SearchService
    deleter: DocumentDeleter
    lifecycle: DocumentLifecycle
    knowledge_base_removal: KnowledgeBaseRemoval
    answers: AnswerService
    janitor: Janitor
    events: DocumentEventHub  # live document changes: one LISTEN connection per process, opened on first use
    api_keys: ApiKeyRepository
    audit: AuditLog
    operations: OperationsQueries
    connectors: ConnectorServices | None = None
    backfill: SparseBackfill | None = None
    models: EmbeddingModels | None = None  # each knowledge base's embedder, one per model per process
    indexes: IndexGenerations | None = None  # each knowledge base's current index generation
    migrations: EmbeddingMigrations | None = None

    @property
    def answer_metrics(self) -> AnswerMetrics:
        return self.answers.metrics

    def worker(self, config: WorkerConfig, worker_id: str | None = None) -> IngestionWorker:
        keeper = JobLeaseKeeping(self.queue.db.url, interval=config.heartbeat_seconds,
                                 lease_seconds=self.queue.lease_seconds) if config.lease_keeper else None
        return IngestionWorker(self.queue, self.processor, config, worker_id=worker_id, deleter=self.deleter,
                               connector_runner=self.connectors.runner if self.connectors else None,
                               backfill=self.backfill, migrations=self.migrations, janitor=self.janitor,
                               keeper=keeper)

    async def open(self) -> None:
        await self.db.open()
        await self.queue.db.open()
        await self.vectors.ensure_ready()

    async def close(self) -> None:
        await self.events.close()
        await self.queue.close()
        await self.queue.db.close()
        await self.db.close()
        others = [e.embedder for e in self.models.services()] if self.models else []
        closers = [self.vectors, self.embedder, self.answers.chat, self.indexes,
                   *(e for e in others if e is not self.embedder)]
        for client in closers:  # HTTP/gRPC clients of remote backends
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()

    async def readiness(self) -> dict[str, bool]:
        """Every configured backend answers: PostgreSQL, and the object storage, vector store and
        embedder when they are remote (those with a ``ping``). Checked concurrently, each bounded."""
        checks: dict[str, Any] = {"database": self.db.ping}
        for name, component in (("storage", self.storage), ("vectors", self.vectors), ("embedder", self.embedder)):
            ping = getattr(component, "ping", None)
            if ping is not None:
                checks[name] = ping

        async def run(check: Any) -> bool:
            try:
                return bool(await asyncio.wait_for(check(), timeout=5.0))
            except Exception:
                return False

        results = await asyncio.gather(*(run(c) for c in checks.values()))
        return dict(zip(checks, results, strict=True))


def build(settings: Settings, *, url: str | None = None, embedder: Embedder | None = None,
          storage: ObjectStorage | None = None, pool_size: int = 10, acquire_timeout: float = 10.0,
          chat: ChatModel | None = None) -> Container:
    """``acquire_timeout``: how long a caller waits for a pooled connection (the API answers 503
    after it while the database is down; a worker's fenced writes ride out a short outage).
    Every pool's transaction that waits ``Settings.idle_transaction_seconds`` for its next
    statement is ended by the server, its row locks with it (a frozen process frees its rows)."""
    url = url or database_url(settings)
    idle_transaction_timeout = settings.idle_transaction_seconds
    db = Database(url, max_size=pool_size, acquire_timeout=acquire_timeout,
                  idle_transaction_timeout=idle_transaction_timeout)
    embedder = embedder or make_embedder(settings)
    storage = storage or make_storage(settings)
    kbs = KnowledgeBaseRepository(db)
    documents = DocumentRepository(db)
    queue_db = queue_database(url, max_size=max(2, pool_size // 2), idle_transaction_timeout=idle_transaction_timeout)
    queue = JobQueue(queue_db, lease_seconds=settings.lease_seconds, retry_delay_seconds=settings.retry_delay_seconds,
                     poison_after=settings.poison_lost_leases)
    snapshots = FilesystemChunkSnapshotStore(settings.snapshots_dir)
    vectors = make_vector_store(settings, db, embedder.dimension, embedder.name)
    vector_table = vectors.table if isinstance(vectors, PgVectorStore) else None  # swept by the janitor
    if vector_table is None:  # Milvus, Qdrant: the sparse side stays in PostgreSQL
        vectors = HybridVectors(vectors, db)
    sparse = make_sparse_encoder(settings, embedder)
    raw_embedder = embedder
    embedder, sparse = make_engine(settings, embedder, sparse)
    centroids = LanguageCentroids(db) if settings.language_centering else None
    limits = parse_limits(settings)
    parsers = default_registry(limits)
    cache = EmbeddingCache(db)

    def embedding_service(model: Embedder) -> EmbeddingService:
        return EmbeddingService(model, cache, batch_size=settings.embed_batch_size,
                                rate_limit_max_wait=settings.rate_limit_max_wait_seconds, sparse=sparse)

    embedding = embedding_service(embedder)
    migration_rows = EmbeddingMigrationRepository(db, lease_seconds=settings.lease_seconds,
                                                  max_attempts=settings.max_attempts)
    local_engine = embedder if isinstance(raw_embedder, LocalE5Embedder) else None

    def kb_embedder(spec: EmbeddingSpec) -> Embedder:
        """Another knowledge base's model: the process's local engine when it is the local model
        (one copy of the weights, one engine), else a new embedder behind an engine of its own."""
        if spec.embedder == "local" and local_engine is not None:
            return local_engine
        return make_engine(settings, make_embedder_for(settings, spec), None)[0]

    models = EmbeddingModels(
        default=embedding, local=EmbeddingSpec("local", LocalE5Embedder.name, LocalE5Embedder.dimension),
        make_embedder=kb_embedder, make_service=embedding_service,
        openai_configured=bool(settings.embedding_base_url),
        max_dimension=2000 if settings.vector_store == "pgvector" else 32768, migrations=migration_rows)
    indexes = IndexGenerations(db, lambda spec, g, kb: make_generation_store(settings, db, spec, g, kb),
                               models.read_plan, models.plan_of, models.default)
    migrations = EmbeddingMigrations(db=db, repository=migration_rows, models=models, indexes=indexes,
                                     retry_delay_seconds=settings.retry_delay_seconds,
                                     drop_grace_seconds=settings.embedding_migration_grace_seconds)
    pipeline = PipelineRepository(queue, indexes)
    processor = DocumentProcessor(
        store=pipeline, storage=storage, parsers=parsers, chunker=StructuredChunker(embedder.count_tokens),
        embedding=embedding, vectors=indexes, generations=indexes, snapshots=snapshots, models=models,
        default_chunk_size=settings.chunk_size_tokens, default_overlap=settings.chunk_overlap_tokens,
        parse_runner=ParseRunner(limits, timeout_seconds=settings.parse_timeout_seconds,
                                 memory_limit_mb=settings.parse_memory_limit_mb, isolate=settings.parse_isolation),
        vision=make_vision(settings), dedup=Deduplicator(PostgresDedupStore(queue), indexes, settings.dedup_min_chars),
        centroids=centroids,
    )
    ingestion = IngestionService(
        documents=documents, storage=storage, parsers=parsers, max_upload_bytes=settings.max_upload_bytes,
        max_filename_length=settings.max_filename_length, max_attempts=settings.max_attempts,
    )
    search = SearchService(embedder=embedder, vectors=indexes, documents=documents, sparse=sparse, models=models,
                           max_top_k=settings.max_search_top_k, max_query_chars=settings.max_query_chars,
                           fusion=Fusion(settings.search_fusion), dense_weight=settings.search_dense_weight,
                           query_cache_size=settings.query_cache_size, metrics=SearchMetrics(), centroids=centroids)
    kb_removal = KnowledgeBaseRemoval(
        repository=KnowledgeBaseDeletionRepository(db, max_attempts=settings.max_attempts), storage=storage,
        vectors=indexes, snapshots=snapshots)
    deleter = DocumentDeleter(store=pipeline, storage=storage, vectors=indexes, snapshots=snapshots,
                              knowledge_bases=kb_removal)
    lifecycle = DocumentLifecycle(
        repository=LifecycleRepository(db, max_attempts=settings.max_attempts,
                                       upload_lease_seconds=settings.upload_lease_seconds), documents=documents,
        storage=storage, vectors=indexes, parsers=parsers, max_upload_bytes=settings.max_upload_bytes,
        max_filename_length=settings.max_filename_length,
    )
    return Container(settings=settings, db=db, knowledge_bases=kbs, documents=documents, queue=queue,
                     pipeline=pipeline, storage=storage, snapshots=snapshots, embedder=embedder, embedding=embedding,
                     vectors=vectors, parsers=parsers, processor=processor, ingestion=ingestion, search=search,
                     deleter=deleter, lifecycle=lifecycle, knowledge_base_removal=kb_removal,
                     answers=make_answers(settings, search, chat),
                     janitor=Janitor(maintenance=MaintenanceRepository(db), storage=storage, snapshots=snapshots,
                                     vector_table=vector_table, grace_seconds=settings.orphan_grace_seconds,
                                     cache=cache, cache_max_entries=settings.embedding_cache_max_entries,
                                     generations=migrations),
                     events=DocumentEventHub(url),
                     api_keys=ApiKeyRepository(db, last_used_interval_seconds=settings.key_last_used_interval_seconds),
                     audit=AuditLog(db), operations=OperationsQueries(db),
                     connectors=build_connectors(settings, db, storage, parsers),
                     backfill=SparseBackfill(db, embedding, cache, centroids),
                     models=models, indexes=indexes, migrations=migrations)


def connector_limits(settings: Settings) -> ConnectorLimits:
    s3 = {"endpoint_url": settings.s3_endpoint_url, "region": settings.s3_region,
          "access_key_id": settings.s3_access_key_id, "secret_access_key": settings.s3_secret_access_key,
          "max_attempts": settings.s3_max_attempts, "connect_timeout": settings.s3_connect_timeout_seconds,
          "read_timeout": settings.s3_read_timeout_seconds}
    return ConnectorLimits(
        max_item_bytes=settings.connector_max_item_bytes or settings.max_upload_bytes,
        fetch_timeout_seconds=settings.connector_fetch_timeout_seconds, max_items=settings.connector_max_items,
        sitemap_max_depth=settings.connector_sitemap_max_depth, directory_roots=settings.connector_directory_roots,
        outbound_allow_networks=settings.outbound_allow_networks, s3=s3,
        sitemap_max_bytes=settings.connector_sitemap_max_bytes)


def build_connectors(settings: Settings, db: Database, storage: ObjectStorage, parsers: ParserRegistry,
                     client: SafeHttpClient | None = None) -> ConnectorServices:
    limits = connector_limits(settings)
    http = client or SafeHttpClient(OutboundPolicy(settings.outbound_allow_networks))

    def source_for(connector: Connector) -> Source:
        return build_source(connector.kind, connector.config, limits, http)

    repository = ConnectorRepository(db, sync_max_attempts=settings.connector_sync_max_attempts)
    queue = SyncQueue(db, lease_seconds=settings.lease_seconds, max_attempts=settings.connector_sync_max_attempts)
    service = SyncService(queue=queue, connectors=repository, storage=storage, parsers=parsers, source_for=source_for,
                          max_filename_length=settings.max_filename_length, max_attempts=settings.max_attempts)
    runner = SyncRunner(queue, service, heartbeat_seconds=settings.effective_heartbeat_seconds,
                        poll_interval_seconds=settings.poll_interval_seconds,
                        retry_delay_seconds=settings.retry_delay_seconds)
    return ConnectorServices(repository=repository, queue=queue, service=service, runner=runner, limits=limits,
                             min_schedule_seconds=settings.connector_min_schedule_seconds,
                             max_per_knowledge_base=settings.max_connectors_per_kb)


def run_migrations(settings: Settings, url: str | None = None) -> list[int]:
    applied = migrate(url or database_url(settings))
    prepare_storage(settings)
    return applied


def prepare_storage(settings: Settings) -> None:
    """S3: check the bucket, and create it when ``ULTIMATE_RAG_S3_CREATE_BUCKET`` allows."""
    if settings.storage_url and settings.storage_url.startswith("s3://"):
        from .adapters.storage.s3 import S3ObjectStorage

        storage = make_storage(settings)
        if isinstance(storage, S3ObjectStorage) and storage.ensure_bucket(create=settings.s3_create_bucket):
            log.info("created the S3 bucket for %s", settings.storage_url)


def freeze_startup_heap() -> None:
    """Called once a server process (the API, a worker) has started: what is alive now (modules,
    the app, its routes and schemas, the pools) lives as long as the process, so the cyclic garbage
    collector stops walking it (``gc.freeze``). Otherwise every full collection walks that whole
    heap again, triggered by nothing but the allocations of ordinary requests."""
    gc.collect()
    gc.freeze()

"""The composition root: the one place that turns settings into wired services. Nothing here runs
at import time; ``build`` is called by the API lifespan, the worker and the CLI."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from .adapters.chunking.chunker import StructuredChunker
from .adapters.embedders.cache import EmbeddingCache
from .adapters.parsers.registry import ParserRegistry, default_registry
from .adapters.postgres.database import Database
from .adapters.postgres.documents import DocumentRepository
from .adapters.postgres.embedded import start_embedded_postgres
from .adapters.postgres.knowledge_bases import KnowledgeBaseRepository
from .adapters.postgres.lifecycle import KnowledgeBaseDeletionRepository, LifecycleRepository
from .adapters.postgres.migrations import migrate
from .adapters.postgres.queue import JobQueue
from .adapters.snapshots.filesystem import FilesystemChunkSnapshotStore
from .adapters.storage.local import LocalObjectStorage
from .adapters.vectors.pgvector import PgVectorStore
from .domain.ports import Embedder, ObjectStorage, VectorStore
from .services.deletion import DocumentDeleter
from .services.embedding import EmbeddingService
from .services.ingestion import IngestionService
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
    url, server = start_embedded_postgres(settings.data_dir)
    _embedded_servers.append(server)  # keep the handle: the server lives while this process does
    os.environ["ULTIMATE_RAG_DATABASE_URL"] = url  # child processes attach to the same server
    return url


def make_storage(settings: Settings) -> ObjectStorage:
    if settings.storage_url and not settings.storage_url.startswith("file://"):
        raise ValueError(f"unsupported storage URL {settings.storage_url!r}: only file:// is available")
    return LocalObjectStorage(settings.objects_dir)


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedder != "local":
        raise ValueError(f"unsupported embedder {settings.embedder!r}: only 'local' is available")
    from .adapters.embedders.local import LocalE5Embedder

    return LocalE5Embedder(batch_size=settings.local_embed_micro_batch)


def make_vector_store(settings: Settings, db: Database, dimension: int) -> VectorStore:
    if settings.vector_store != "pgvector":
        raise ValueError(f"unsupported vector store {settings.vector_store!r}: only 'pgvector' is available")
    return PgVectorStore(db, dimension)


@dataclass
class Container:
    settings: Settings
    db: Database
    knowledge_bases: KnowledgeBaseRepository
    documents: DocumentRepository
    queue: JobQueue
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

    def worker(self, config: WorkerConfig, worker_id: str | None = None) -> IngestionWorker:
        return IngestionWorker(self.queue, self.processor, config, worker_id=worker_id, deleter=self.deleter)

    async def open(self) -> None:
        await self.db.open()
        await self.queue.db.open()
        await self.vectors.ensure_ready()

    async def close(self) -> None:
        await self.queue.close()
        await self.queue.db.close()
        await self.db.close()


def build(settings: Settings, *, url: str | None = None, embedder: Embedder | None = None,
          storage: ObjectStorage | None = None, pool_size: int = 10) -> Container:
    url = url or database_url(settings)
    db = Database(url, max_size=pool_size)
    embedder = embedder or make_embedder(settings)
    storage = storage or make_storage(settings)
    kbs = KnowledgeBaseRepository(db)
    documents = DocumentRepository(db)
    queue_db = Database(url, max_size=max(2, pool_size // 2), register_vector=False, generic_plans=True)
    queue = JobQueue(queue_db, lease_seconds=settings.lease_seconds)
    snapshots = FilesystemChunkSnapshotStore(settings.snapshots_dir)
    vectors = make_vector_store(settings, db, embedder.dimension)
    parsers = default_registry()
    embedding = EmbeddingService(embedder, EmbeddingCache(db), batch_size=settings.embed_batch_size,
                                 rate_limit_max_wait=settings.rate_limit_max_wait_seconds)
    processor = DocumentProcessor(
        queue=queue, storage=storage, parsers=parsers, chunker=StructuredChunker(embedder.count_tokens),
        embedding=embedding, vectors=vectors, snapshots=snapshots,
        default_chunk_size=settings.chunk_size_tokens, default_overlap=settings.chunk_overlap_tokens,
    )
    ingestion = IngestionService(
        documents=documents, knowledge_bases=kbs, storage=storage, parsers=parsers,
        max_upload_bytes=settings.max_upload_bytes, max_filename_length=settings.max_filename_length,
        max_attempts=settings.max_attempts,
    )
    search = SearchService(embedder=embedder, vectors=vectors, documents=documents,
                           max_top_k=settings.max_search_top_k, max_query_chars=settings.max_query_chars)
    kb_removal = KnowledgeBaseRemoval(
        repository=KnowledgeBaseDeletionRepository(db, max_attempts=settings.max_attempts), storage=storage,
        vectors=vectors, snapshots=snapshots)
    deleter = DocumentDeleter(queue=queue, storage=storage, vectors=vectors, snapshots=snapshots,
                              knowledge_bases=kb_removal)
    lifecycle = DocumentLifecycle(
        repository=LifecycleRepository(db, max_attempts=settings.max_attempts), documents=documents,
        storage=storage, vectors=vectors, parsers=parsers, max_upload_bytes=settings.max_upload_bytes,
        max_filename_length=settings.max_filename_length,
    )
    return Container(settings=settings, db=db, knowledge_bases=kbs, documents=documents, queue=queue,
                     storage=storage, snapshots=snapshots, embedder=embedder, embedding=embedding,
                     vectors=vectors, parsers=parsers, processor=processor, ingestion=ingestion, search=search,
                     deleter=deleter, lifecycle=lifecycle, knowledge_base_removal=kb_removal)


def run_migrations(settings: Settings, url: str | None = None) -> list[int]:
    return migrate(url or database_url(settings))

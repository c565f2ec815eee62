"""The ingest feature: knowledge bases and documents, the submit, the pipeline (its fenced
repository on the queue's lease, the processor and the document deletion), and the lifecycle operations
(reindex, re-upload, delete, fail, recover, a knowledge base's deletion)."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapter_factories import make_vision
from ..adapters.chunking.chunker import StructuredChunker
from ..adapters.parsers.isolation import ParseRunner
from ..adapters.postgres.dedup import PostgresDedupStore
from ..adapters.postgres.documents import DocumentRepository
from ..adapters.postgres.knowledge_bases import KnowledgeBaseRepository
from ..adapters.postgres.lifecycle import KnowledgeBaseDeletionRepository, LifecycleRepository
from ..adapters.postgres.pipeline import PipelineRepository
from ..services.dedup import Deduplicator
from ..services.document_deletion import DocumentDeletion
from ..services.ingestion import IngestionService
from ..services.knowledge_base_deletion import KnowledgeBaseDeletion
from ..services.lifecycle import DocumentLifecycle
from ..services.parse_lane import LongParseLane
from ..services.processing import DocumentProcessor
from ..settings import Settings
from .embedding import EmbeddingFeature
from .infrastructure import Infrastructure


@dataclass
class IngestFeature:
    knowledge_bases: KnowledgeBaseRepository
    documents: DocumentRepository
    ingestion: IngestionService
    pipeline: PipelineRepository  # the pipeline's fenced writes, on the queue's lease and pool
    processor: DocumentProcessor
    document_deletion: DocumentDeletion
    lifecycle: DocumentLifecycle
    knowledge_base_deletion: KnowledgeBaseDeletion


def wire(settings: Settings, infra: Infrastructure, embedding: EmbeddingFeature) -> IngestFeature:
    db, storage, snapshots, parsers = infra.db, infra.storage, infra.snapshots, infra.parsers
    indexes = embedding.indexes  # the one vector store every service here sees
    documents = DocumentRepository(db)
    pipeline = PipelineRepository(infra.queue, indexes)
    processor = DocumentProcessor(
        store=pipeline, storage=storage, parsers=parsers, chunker=StructuredChunker(embedding.embedder.count_tokens),
        models=embedding.models, indexes=indexes, snapshots=snapshots,
        default_chunk_size=settings.chunk_size_tokens, default_overlap=settings.chunk_overlap_tokens,
        parse_runner=ParseRunner(infra.limits, timeout_seconds=settings.parse_timeout_seconds,
                                 page_allowance_seconds=settings.parse_page_seconds,
                                 document_timeout_seconds=settings.parse_document_timeout_seconds,
                                 memory_limit_mb=settings.parse_memory_limit_mb, isolate=settings.parse_isolation),
        vision=make_vision(settings),
        dedup=Deduplicator(PostgresDedupStore(infra.queue), indexes, settings.dedup_min_chars),
        centroids=embedding.centroids, migration_items=embedding.migrations.repository,
        lane=LongParseLane(settings.long_parse_seconds, settings.worker_concurrency
                           if settings.long_parse_slots is None else settings.long_parse_slots),
        korean=embedding.korean)
    kb_deletion = KnowledgeBaseDeletion(
        repository=KnowledgeBaseDeletionRepository(db, max_attempts=settings.max_attempts), storage=storage,
        vectors=indexes, snapshots=snapshots)
    lifecycle = DocumentLifecycle(
        repository=LifecycleRepository(db, max_attempts=settings.max_attempts,
                                       upload_lease_seconds=settings.upload_lease_seconds),
        documents=documents, storage=storage, vectors=indexes, parsers=parsers,
        max_upload_bytes=settings.max_upload_bytes, max_filename_length=settings.max_filename_length)
    return IngestFeature(
        knowledge_bases=KnowledgeBaseRepository(db), documents=documents,
        ingestion=IngestionService(documents=documents, storage=storage, parsers=parsers,
                                   max_upload_bytes=settings.max_upload_bytes, max_attempts=settings.max_attempts,
                                   max_filename_length=settings.max_filename_length),
        pipeline=pipeline, processor=processor, knowledge_base_deletion=kb_deletion, lifecycle=lifecycle,
        document_deletion=DocumentDeletion(store=pipeline, storage=storage, vectors=indexes, snapshots=snapshots,
                                knowledge_bases=kb_deletion))

"""Ports: what the services need from the outside world, one module per feature. Adapters implement
these Protocols; the composition root (``bootstrap/``) decides which adapter plays which port.

    storage      ObjectStorage, ChunkSnapshotStore, SweptSnapshots
    vectors      VectorStore, CandidateSearch, IndexRouter (the one vector store services see),
                 GenerationAdmin
    embedding    Embedder, StreamingEmbedder (the engine), SparseEncoder, EmbeddingCacheStore,
                 CentroidStore, Truncating
    parsing      Parser, ParserResolver, ParseRunnerPort, ImageDescriber, Chunker
    pipeline     TaskLeases, ClaimingLeases, JobLeasesPort, PipelineStore, DedupStore, DedupSession
    lifecycle    LifecycleStore, LifecycleSession, DocumentReader, KnowledgeBaseRemovalStore,
                 KnowledgeBaseReader, DocumentIntake
    migrations   MigrationStore, IndexStateReader, MigrationItemQueue
    maintenance  MaintenanceStore, GenerationSweeper, BackfillStore, SparseIndexWriter
    search       ReadyChunks, SearchTimings, LexicalStatistics, Reranker
    catalog      KnowledgeBaseStore, DocumentCatalog, ApiKeyStore, AuditTrail, OperationsReadout,
                 DocumentEvents (what the API reads and writes besides the services)
    chat         ChatModel
    health       Pingable, Closable
"""

from .catalog import (
    ApiKeyStore,
    AuditTrail,
    DocumentCatalog,
    DocumentEvents,
    EventSubscription,
    KnowledgeBaseStore,
    OperationsReadout,
)
from .chat import ChatModel
from .embedding import (
    CentroidStore,
    Embedder,
    EmbeddingCacheStore,
    EngineLoad,
    SparseEncoder,
    SparseVector,
    StreamingEmbedder,
    Truncating,
)
from .health import Closable, Pingable
from .lifecycle import (
    DocumentIntake,
    DocumentReader,
    KnowledgeBaseReader,
    KnowledgeBaseRemovalStore,
    LifecycleSession,
    LifecycleStore,
    LockedDocument,
)
from .maintenance import BackfillStore, GenerationSweeper, MaintenanceStore, ObjectOwner, Owners, SparseIndexWriter
from .migrations import IndexStateReader, MigrationItemQueue, MigrationStore
from .parsing import Chunker, ImageDescriber, Parser, ParserResolver, ParseRunnerPort
from .pipeline import ClaimingLeases, DedupSession, DedupStore, JobLeasesPort, PipelineStore, TaskLeases
from .search import LexicalStatistics, ReadyChunks, Reranker, SearchTimings
from .storage import ChunkSnapshotStore, ObjectStorage, SweptSnapshots
from .vectors import CandidateSearch, GenerationAdmin, IndexRouter, VectorStore

__all__ = [
    "ApiKeyStore",
    "AuditTrail",
    "BackfillStore",
    "CandidateSearch",
    "CentroidStore",
    "ChatModel",
    "ChunkSnapshotStore",
    "Chunker",
    "ClaimingLeases",
    "Closable",
    "DedupSession",
    "DedupStore",
    "DocumentCatalog",
    "DocumentEvents",
    "DocumentIntake",
    "DocumentReader",
    "Embedder",
    "EmbeddingCacheStore",
    "EngineLoad",
    "EventSubscription",
    "GenerationAdmin",
    "GenerationSweeper",
    "ImageDescriber",
    "IndexRouter",
    "IndexStateReader",
    "JobLeasesPort",
    "KnowledgeBaseReader",
    "KnowledgeBaseRemovalStore",
    "KnowledgeBaseStore",
    "LexicalStatistics",
    "LifecycleSession",
    "LifecycleStore",
    "LockedDocument",
    "MaintenanceStore",
    "MigrationItemQueue",
    "MigrationStore",
    "ObjectOwner",
    "ObjectStorage",
    "OperationsReadout",
    "Owners",
    "ParseRunnerPort",
    "Parser",
    "ParserResolver",
    "Pingable",
    "PipelineStore",
    "ReadyChunks",
    "Reranker",
    "SearchTimings",
    "SparseEncoder",
    "SparseIndexWriter",
    "SparseVector",
    "StreamingEmbedder",
    "SweptSnapshots",
    "TaskLeases",
    "Truncating",
    "VectorStore",
]

"""Ports: what the services need from the outside world, one module per feature. Adapters implement
these Protocols; the composition root (``bootstrap/``) decides which adapter plays which port.

    storage      ObjectStorage, ChunkSnapshotStore, ChunkSnapshotReader, SweptSnapshots
    vectors      VectorStore, CandidateSearch, IndexRouter (the one vector store services see),
                 GenerationAdmin
    embedding    Embedder, StreamingEmbedder (the engine), SparseEncoder, EmbeddingCacheStore,
                 CentroidStore, Truncating, PairedDocuments, PairedQueries (one pass for both vectors)
    parsing      Parser, ParserResolver, ParseExecutor, ImageDescriber, Chunker
    pipeline     TaskLeases, ClaimingLeases, LeaseKeeping, JobLeases, PipelineStore, DedupStore, DedupSession
    lifecycle    LifecycleStore, LifecycleSession, DocumentReader, KnowledgeBaseDeletionStore,
                 KnowledgeBaseReader, DocumentIntake
    migrations   MigrationStore, IndexStateReader, MigrationItemQueue
    maintenance  MaintenanceStore, GenerationSweeper, BackfillStore, SparseIndexWriter,
                 IdentifierBackfillStore, IdleBackfill
    search       ReadyChunks, IdentifierIndex, SearchTimings, LexicalStatistics, Reranker
    catalog      KnowledgeBaseStore, DocumentCatalog, ApiKeyStore, AuditTrail, OperationsReadout,
                 DocumentEvents (what the API reads and writes besides the services)
    connectors   ConnectorStore, ConnectorSyncs, OutboundFetch, VersionedObjects
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
from .connectors import ConnectorStore, ConnectorSyncs, FetchedResponse, OutboundFetch, VersionedObjects
from .embedding import (
    CentroidStore,
    DensePair,
    Embedder,
    EmbeddingCacheStore,
    EngineLoad,
    PairedDocuments,
    PairedQueries,
    SparseEncoder,
    SparseVector,
    StreamingEmbedder,
    Truncating,
)
from .health import Closable, Pingable
from .lifecycle import (
    DocumentIntake,
    DocumentReader,
    KnowledgeBaseDeletionStore,
    KnowledgeBaseReader,
    LifecycleSession,
    LifecycleStore,
    LockedDocument,
)
from .maintenance import (
    BackfillStore,
    GenerationSweeper,
    IdentifierBackfillStore,
    IdleBackfill,
    MaintenanceStore,
    ObjectOwner,
    Owners,
    SparseIndexWriter,
)
from .migrations import IndexStateReader, MigrationItemQueue, MigrationStore
from .parsing import Chunker, ImageDescriber, ParseExecutor, Parser, ParserResolver
from .pipeline import (
    ClaimingLeases,
    DedupSession,
    DedupStore,
    JobLeases,
    LeaseKeeping,
    PipelineStore,
    ProgressReports,
    TaskLeases,
)
from .search import IdentifierIndex, LexicalStatistics, ReadyChunks, Reranker, SearchTimings
from .storage import ChunkSnapshotReader, ChunkSnapshotStore, ObjectStorage, SweptSnapshots
from .vectors import CandidateSearch, GenerationAdmin, IndexRouter, VectorStore

__all__ = [
    "ApiKeyStore",
    "AuditTrail",
    "BackfillStore",
    "CandidateSearch",
    "CentroidStore",
    "ChatModel",
    "ChunkSnapshotReader",
    "ChunkSnapshotStore",
    "Chunker",
    "ClaimingLeases",
    "Closable",
    "ConnectorStore",
    "ConnectorSyncs",
    "DedupSession",
    "DedupStore",
    "DensePair",
    "DocumentCatalog",
    "DocumentEvents",
    "DocumentIntake",
    "DocumentReader",
    "Embedder",
    "EmbeddingCacheStore",
    "EngineLoad",
    "EventSubscription",
    "FetchedResponse",
    "GenerationAdmin",
    "GenerationSweeper",
    "IdentifierBackfillStore",
    "IdentifierIndex",
    "IdleBackfill",
    "ImageDescriber",
    "IndexRouter",
    "IndexStateReader",
    "JobLeases",
    "KnowledgeBaseDeletionStore",
    "KnowledgeBaseReader",
    "KnowledgeBaseStore",
    "LeaseKeeping",
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
    "OutboundFetch",
    "Owners",
    "PairedDocuments",
    "PairedQueries",
    "ParseExecutor",
    "Parser",
    "ParserResolver",
    "Pingable",
    "PipelineStore",
    "ProgressReports",
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
    "VersionedObjects",
]

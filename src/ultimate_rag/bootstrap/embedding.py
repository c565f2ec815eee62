"""The embedding feature: the process's model behind its engine (and the sparse head beside it),
each knowledge base's own model (one embedder per model per process), the embedding cache, the
language centroids, the index generations router — the one vector store the services see — and
the embedding-model migrations that build new generations."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from ..adapter_factories import (
    make_embedder,
    make_embedder_for,
    make_engine,
    make_generation_store,
    make_sparse_encoder,
    make_vector_store,
)
from ..adapters.embedders.cache import EmbeddingCache
from ..adapters.embedders.language_prior import shipped_prior
from ..adapters.embedders.local import LocalE5Embedder
from ..adapters.postgres.centroids import LanguageCentroids
from ..adapters.postgres.embedding_migrations import EmbeddingMigrationRepository
from ..adapters.vectors.generations import GenerationStore, IndexGenerations
from ..adapters.vectors.korean_morphemes import KiwiMorphemes
from ..adapters.vectors.pgvector import PgVectorStore
from ..adapters.vectors.sparse_pg import HybridVectors
from ..domain.embedding_models import EmbeddingSpec
from ..domain.lexical import KoreanMorphemes
from ..domain.ports import Embedder, SparseEncoder, StreamingEmbedder, VectorStore
from ..services.embedding.migration import EmbeddingMigrations
from ..services.embedding.models import EmbeddingModels
from ..services.embedding.passages import EmbeddingService
from ..settings import Settings
from .infrastructure import Infrastructure


@dataclass
class EmbeddingFeature:
    embedder: StreamingEmbedder  # the process's default model, behind its engine
    sparse: SparseEncoder | None
    service: EmbeddingService  # the default model's embedding service
    models: EmbeddingModels  # each knowledge base's model
    cache: EmbeddingCache
    centroids: LanguageCentroids | None
    indexes: IndexGenerations  # the one vector store services see: writes, deletes and searches by generation
    # the default model's shared index (generation 0) as one store: the readiness check pings it, the
    # process closes its clients, the janitor sweeps its table (pgvector); services never see it
    default_index: VectorStore
    migrations: EmbeddingMigrations
    # BM25's Korean analyzer (loaded on the first Korean text): one per process, shared by ingest,
    # search and the backfill, so that a knowledge base's terms are cut alike everywhere
    korean: KoreanMorphemes = field(default_factory=KiwiMorphemes)

    @property
    def swept_table(self) -> str | None:
        """pgvector's table, whose orphan vectors the janitor removes (a Milvus or Qdrant leftover
        is never served: the double filter drops it)."""
        return self.default_index.table if isinstance(self.default_index, PgVectorStore) else None


def wire(settings: Settings, infra: Infrastructure, embedder: Embedder | None = None) -> EmbeddingFeature:
    db = infra.db
    raw = embedder or make_embedder(settings)
    engine, sparse = make_engine(settings, raw, make_sparse_encoder(settings, raw))
    default_index = make_vector_store(settings, db, raw.dimension, raw.name)
    if not isinstance(default_index, PgVectorStore):  # Milvus, Qdrant: the sparse side stays in PostgreSQL
        default_index = HybridVectors(default_index, db)
    cache = EmbeddingCache(db)
    local_engine = engine if isinstance(raw, LocalE5Embedder) else None

    def service_of(model: StreamingEmbedder) -> EmbeddingService:
        return EmbeddingService(model, cache, batch_size=settings.embed_batch_size,
                                rate_limit_max_wait=settings.rate_limit_max_wait_seconds, sparse=sparse)

    def model_for(spec: EmbeddingSpec) -> StreamingEmbedder:
        """Another knowledge base's model: the process's local engine when it is the local model
        (one copy of the weights, one engine), else a new embedder behind an engine of its own."""
        if spec.embedder == "local" and local_engine is not None:
            return local_engine
        return make_engine(settings, make_embedder_for(settings, spec), None)[0]

    def generation_store(spec: EmbeddingSpec, generation: int, kb_id: UUID) -> GenerationStore:
        return make_generation_store(settings, db, spec, generation, kb_id)

    service = service_of(engine)
    rows = EmbeddingMigrationRepository(db, lease_seconds=settings.lease_seconds, max_attempts=settings.max_attempts)
    models = EmbeddingModels(
        default=service, local=EmbeddingSpec("local", LocalE5Embedder.name, LocalE5Embedder.dimension),
        make_embedder=model_for, make_service=service_of, openai_configured=bool(settings.embedding_base_url),
        max_dimension=2000 if settings.vector_store == "pgvector" else 32768, states=rows,
        max_models=settings.max_embedding_models)
    indexes = IndexGenerations(db, generation_store, models.read_plan, models.plan_of, models.default)
    migrations = EmbeddingMigrations(repository=rows, models=models, indexes=indexes,
                                     retry_delay_seconds=settings.retry_delay_seconds,
                                     drop_grace_seconds=settings.embedding_migration_grace_seconds)
    centroids = LanguageCentroids(db, prior=shipped_prior()) if settings.language_centering else None
    return EmbeddingFeature(embedder=engine, sparse=sparse, service=service, models=models, cache=cache,
                            centroids=centroids,
                            indexes=indexes, default_index=default_index, migrations=migrations)

"""The maintenance feature, off the ingest path: the orphan sweeper, the sparse backfill of chunks
indexed before hybrid search existed, and the operations read-outs (/metrics gauges, stuck
documents)."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapters.postgres.backfill import BackfillRepository
from ..adapters.postgres.identifiers import PostgresIdentifierIndex
from ..adapters.postgres.maintenance import MaintenanceRepository, OperationsQueries
from ..adapters.vectors.sparse_pg import PostgresSparseIndex
from ..services.backfill import Backfills, IdentifierBackfill, SparseBackfill
from ..services.janitor import Janitor
from ..settings import Settings
from .embedding import EmbeddingFeature
from .infrastructure import Infrastructure


@dataclass
class MaintenanceFeature:
    janitor: Janitor  # the CLI's ``--grace-seconds`` is ``janitor.with_grace(...)``
    backfill: Backfills  # identifier keys, then sparse vectors, of chunks indexed before those existed
    operations: OperationsQueries


def wire(settings: Settings, infra: Infrastructure, embedding: EmbeddingFeature) -> MaintenanceFeature:
    db = infra.db
    janitor = Janitor(maintenance=MaintenanceRepository(db), storage=infra.storage, snapshots=infra.snapshots,
                      vector_table=embedding.swept_table, grace_seconds=settings.orphan_grace_seconds,
                      cache=embedding.cache, cache_max_entries=settings.embedding_cache_max_entries,
                      generations=embedding.migrations)
    sparse = SparseBackfill(chunks=BackfillRepository(db), sparse_index=PostgresSparseIndex(db),
                            embedding=embedding.service, cache=embedding.cache, centroids=embedding.centroids,
                            korean=embedding.korean)
    backfill = Backfills(IdentifierBackfill(PostgresIdentifierIndex(db)), sparse)
    return MaintenanceFeature(janitor=janitor, backfill=backfill, operations=OperationsQueries(db))

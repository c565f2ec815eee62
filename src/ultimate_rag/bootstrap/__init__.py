"""The composition root: the one place that turns settings into wired services, one small ``wire``
per feature. Nothing here runs at import time; ``build`` is called by the API lifespan, the worker
and the CLI, and every process gets the same features:

    infrastructure  the pools, object storage, snapshots, parsers, live events   (infrastructure.py)
    embedding       models behind the engine, cache, centroids, index generations,
                    embedding-model migrations                                     (embedding.py)
    ingest          knowledge bases, documents, submit, pipeline, lifecycle       (ingest.py)
    retrieval       search and grounded answers                                   (retrieval.py)
    connectors      connectors, syncs, sources                                    (connectors.py)
    maintenance     janitor, sparse backfill, operations read-outs                (maintenance.py)
    access          API keys, audit log                                           (access.py)

Which adapter implements which port is decided in ``adapter_factories.py`` (from the settings)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..adapter_factories import make_storage
from ..adapters.postgres.identifiers import PostgresIdentifierIndex
from ..adapters.postgres.lease_keeper import JobLeaseKeeping
from ..adapters.postgres.migrations import migrate
from ..domain.ports import ChatModel, Closable, Embedder, ObjectStorage, Pingable
from ..services.connectors.runner import ConnectorServices
from ..services.job_loop import IngestionWorker, WorkerConfig
from ..settings import Settings
from . import access, connectors, embedding, infrastructure, ingest, maintenance, retrieval
from .access import AccessFeature
from .embedding import EmbeddingFeature
from .infrastructure import Infrastructure, database_url
from .ingest import IngestFeature
from .maintenance import MaintenanceFeature
from .retrieval import RetrievalFeature, make_answers

__all__ = ["Container", "build", "database_url", "freeze_startup_heap", "make_answers", "prepare_storage",
           "run_migrations"]
log = logging.getLogger(__name__)


@dataclass
class Container:
    """Everything one process uses, by feature. Routes get narrow dependencies from it
    (``api/deps.py``); the worker process gets its worker from ``worker``."""

    settings: Settings
    infra: Infrastructure
    embedding: EmbeddingFeature
    ingest: IngestFeature
    retrieval: RetrievalFeature
    connectors: ConnectorServices
    maintenance: MaintenanceFeature
    access: AccessFeature

    def worker(self, config: WorkerConfig, worker_id: str | None = None) -> IngestionWorker:
        """The job loop, with the document deletion, the connector syncs, the sparse backfill, the
        embedding-model migrations and the janitor beside it."""
        keeper = JobLeaseKeeping(self.infra.queue.db.url, interval=config.heartbeat_seconds,
                                 lease_seconds=self.infra.queue.lease_seconds) if config.lease_keeper else None
        return IngestionWorker(self.infra.queue, self.ingest.processor, config, worker_id=worker_id,
                               document_deletion=self.ingest.document_deletion, connector_runner=self.connectors.runner,
                               backfill=self.maintenance.backfill, migrations=self.embedding.migrations,
                               janitor=self.maintenance.janitor, keeper=keeper)

    async def open(self) -> None:
        await self.infra.db.open()
        await self.infra.queue.db.open()
        await self.embedding.default_index.ensure_ready()

    async def close(self) -> None:
        await self.infra.events.close()
        await self.infra.queue.close()
        await self.infra.queue.db.close()
        await self.infra.db.close()
        default = self.embedding.embedder
        others = [s.embedder for s in self.embedding.models.services() if s.embedder is not default]
        for client in (self.embedding.default_index, default, self.retrieval.answers.chat, self.embedding.indexes,
                       self.retrieval.search.reranker, *others):  # HTTP/gRPC clients of remote backends
            if isinstance(client, Closable):
                await client.aclose()

    async def readiness(self) -> dict[str, bool]:
        """Every configured backend answers: PostgreSQL, and the object storage, vector store and
        embedder when they are remote (those with a ``ping``). Checked concurrently, each bounded."""
        checks: dict[str, Callable[[], Awaitable[bool]]] = {"database": self.infra.db.ping}
        for name, component in (("storage", self.infra.storage), ("vectors", self.embedding.default_index),
                                ("embedder", self.embedding.embedder)):
            if isinstance(component, Pingable):
                checks[name] = component.ping

        async def run(check: Callable[[], Awaitable[bool]]) -> bool:
            try:
                return bool(await asyncio.wait_for(check(), timeout=5.0))
            except Exception:
                return False

        results = await asyncio.gather(*(run(c) for c in checks.values()))
        return dict(zip(checks, results, strict=True))


def build(settings: Settings, *, url: str | None = None, embedder: Embedder | None = None,
          storage: ObjectStorage | None = None, pool_size: int = 10, acquire_timeout: float = 10.0,
          chat: ChatModel | None = None, statement_timeout: float | None = None) -> Container:
    """``embedder``, ``storage``, ``chat``: given instead of the settings' (tests, benchmarks);
    ``acquire_timeout``: how long a caller waits for a pooled connection, ``statement_timeout``:
    how long one of its statements may run (infrastructure.py; the API bounds both)."""
    infra = infrastructure.wire(settings, url or database_url(settings), storage=storage, pool_size=pool_size,
                                acquire_timeout=acquire_timeout, statement_timeout=statement_timeout)
    models = embedding.wire(settings, infra, embedder)
    documents = ingest.wire(settings, infra, models)
    return Container(settings=settings, infra=infra, embedding=models, ingest=documents,
                     retrieval=retrieval.wire(settings, models, documents.documents, chat,
                                              PostgresIdentifierIndex(infra.db)),
                     connectors=connectors.wire(settings, infra),
                     maintenance=maintenance.wire(settings, infra, models), access=access.wire(settings, infra))


def run_migrations(settings: Settings, url: str | None = None) -> list[int]:
    applied = migrate(url or database_url(settings))
    prepare_storage(settings)
    return applied


def prepare_storage(settings: Settings) -> None:
    """S3: check the bucket, and create it when ``ULTIMATE_RAG_S3_CREATE_BUCKET`` allows."""
    if settings.storage_url and settings.storage_url.startswith("s3://"):
        from ..adapters.storage.s3 import S3ObjectStorage

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

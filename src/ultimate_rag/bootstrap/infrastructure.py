"""What every feature shares: the database pools (the general one and the job queue's), the
object storage, the chunk snapshots, the parser registry, and the live-events hub."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..adapter_factories import make_storage, parse_limits
from ..adapters.parsers.limits import ParseLimits
from ..adapters.parsers.registry import ParserRegistry, default_registry
from ..adapters.postgres.database import Database
from ..adapters.postgres.embedded import start_embedded_postgres
from ..adapters.postgres.events import DocumentEventHub
from ..adapters.postgres.queue import JobQueue, queue_database
from ..adapters.snapshots.filesystem import FilesystemChunkSnapshotStore
from ..domain.ports import ObjectStorage
from ..settings import Settings

log = logging.getLogger(__name__)
_embedded_servers: list[object] = []


def database_url(settings: Settings) -> str:
    """The configured server, or the embedded PostgreSQL in the data dir (started on first use)."""
    if settings.database_url:
        return settings.database_url
    # restarted if it dies; stopped once its owners are gone, also after a SIGKILL, when the workers
    # that were handing their jobs back have left (or the grace period and half a minute passed)
    url, server = start_embedded_postgres(settings.data_dir, supervise=True,
                                          linger_seconds=settings.shutdown_grace_seconds + 30.0)
    _embedded_servers.append(server)  # keep the handle: the server lives while this process does
    return url


@dataclass
class Infrastructure:
    url: str
    db: Database  # the general pool
    queue: JobQueue  # the lease, on its own pool (generic plans)
    storage: ObjectStorage
    snapshots: FilesystemChunkSnapshotStore
    limits: ParseLimits
    parsers: ParserRegistry
    events: DocumentEventHub  # live document changes: one LISTEN connection per process, opened on first use


def wire(settings: Settings, url: str, *, storage: ObjectStorage | None, pool_size: int,
         acquire_timeout: float, statement_timeout: float | None = None) -> Infrastructure:
    """``acquire_timeout``: how long a caller waits for a pooled connection (the API answers 503
    after it while the database is down; a worker's fenced writes ride out a short outage).
    Every pool's transaction that waits ``Settings.idle_transaction_seconds`` for its next
    statement is ended by the server, its row locks with it (a frozen process frees its rows)."""
    idle = settings.idle_transaction_seconds
    db = Database(url, max_size=pool_size, acquire_timeout=acquire_timeout, idle_transaction_timeout=idle,
                  statement_timeout=statement_timeout)
    queue_db = queue_database(url, max_size=max(2, pool_size // 2), idle_transaction_timeout=idle)
    queue = JobQueue(queue_db, lease_seconds=settings.lease_seconds, retry_delay_seconds=settings.retry_delay_seconds,
                     poison_after=settings.poison_lost_leases)
    limits = parse_limits(settings)
    return Infrastructure(url=url, db=db, queue=queue, storage=storage or make_storage(settings),
                          snapshots=FilesystemChunkSnapshotStore(settings.snapshots_dir), limits=limits,
                          parsers=default_registry(limits), events=DocumentEventHub(url))

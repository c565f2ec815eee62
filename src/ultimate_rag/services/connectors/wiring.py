"""Connector services built from settings (called by ``bootstrap.build``, the composition root)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from ...adapters.http.outbound import OutboundPolicy, SafeHttpClient
from ...adapters.postgres.connector_syncs import SyncQueue
from ...adapters.postgres.connectors import Connector, ConnectorRepository
from ...adapters.postgres.database import Database
from ...domain.ports import ObjectStorage, ParserResolver
from ...settings import Settings
from .base import Source
from .runner import SyncRunner
from .sources import ConnectorLimits, build_source
from .sync import SyncService


@dataclass
class ConnectorServices:
    repository: ConnectorRepository
    queue: SyncQueue
    service: SyncService
    runner: SyncRunner
    limits: ConnectorLimits
    min_schedule_seconds: int
    max_per_knowledge_base: int = 50


def limits_from(settings: Settings) -> ConnectorLimits:
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


def build_connectors(settings: Settings, db: Database, storage: ObjectStorage, parsers: ParserResolver,
                     client: SafeHttpClient | None = None) -> ConnectorServices:
    limits = limits_from(settings)
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


def start_syncs(runner: SyncRunner | None, worker_id: str, stop: asyncio.Event) -> asyncio.Task[Any] | None:
    """The worker's connector-sync loop, beside its ingestion loop (one sync at a time per worker)."""
    if runner is None:
        return None
    return asyncio.create_task(runner.run_periodically(worker_id, stop), name="connector-syncs")


async def stop_syncs(task: asyncio.Task[Any] | None, grace_seconds: float) -> None:
    """After ``stop``: let the loop hand its sync back, then make sure it is gone."""
    if task is None:
        return
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(task), grace_seconds + 5.0)
    task.cancel()
    with contextlib.suppress(BaseException):
        await task

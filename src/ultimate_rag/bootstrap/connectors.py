"""The connectors feature: connectors and their syncs, the sources they read (URLs, sitemaps, S3,
server directories) through the one outbound HTTP client, and the sync runner a worker runs."""

from __future__ import annotations

from ..adapters.http.outbound import OutboundPolicy, SafeHttpClient
from ..adapters.postgres.connector_syncs import SyncQueue
from ..adapters.postgres.connectors import ConnectorRepository
from ..domain.connectors import Connector
from ..domain.ports import VersionedObjects
from ..services.connectors.base import Source
from ..services.connectors.runner import ConnectorServices, SyncRunner
from ..services.connectors.sources import ConnectorLimits, build_source
from ..services.connectors.sync import SyncService
from ..settings import Settings
from .infrastructure import Infrastructure


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


def wire(settings: Settings, infra: Infrastructure, client: SafeHttpClient | None = None) -> ConnectorServices:
    limits = connector_limits(settings)
    http = client or SafeHttpClient(OutboundPolicy(settings.outbound_allow_networks))

    def open_bucket(bucket: str, prefix: str) -> VersionedObjects:
        from ..adapters.storage.s3 import S3ObjectStorage  # boto3 only when an S3 connector syncs

        return S3ObjectStorage(bucket, prefix, **limits.s3)

    def source_for(connector: Connector) -> Source:
        return build_source(connector.kind, connector.config, limits, http, open_bucket)

    repository = ConnectorRepository(infra.db, sync_max_attempts=settings.connector_sync_max_attempts)
    queue = SyncQueue(infra.db, lease_seconds=settings.lease_seconds, max_attempts=settings.connector_sync_max_attempts)
    service = SyncService(queue=queue, connectors=repository, storage=infra.storage, parsers=infra.parsers,
                          source_for=source_for, max_filename_length=settings.max_filename_length,
                          max_attempts=settings.max_attempts)
    runner = SyncRunner(queue, service, heartbeat_seconds=settings.effective_heartbeat_seconds,
                        poll_interval_seconds=settings.poll_interval_seconds,
                        retry_delay_seconds=settings.retry_delay_seconds)
    return ConnectorServices(repository=repository, queue=queue, service=service, runner=runner, limits=limits,
                             min_schedule_seconds=settings.connector_min_schedule_seconds,
                             max_per_knowledge_base=settings.max_connectors_per_kb)

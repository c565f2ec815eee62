"""The access feature: API keys (checked on every /api request and by /mcp) and the audit log."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapters.postgres.api_keys import ApiKeyRepository
from ..adapters.postgres.audit import AuditLog
from ..settings import Settings
from .infrastructure import Infrastructure


@dataclass
class AccessFeature:
    api_keys: ApiKeyRepository
    audit: AuditLog


def wire(settings: Settings, infra: Infrastructure) -> AccessFeature:
    return AccessFeature(
        api_keys=ApiKeyRepository(infra.db, last_used_interval_seconds=settings.key_last_used_interval_seconds),
        audit=AuditLog(infra.db))

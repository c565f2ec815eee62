"""Builds a connector's source from its kind and configuration, and validates configurations (the
API calls ``validate_config`` before anything is stored; a sync builds the source again, so a
configuration that became invalid — a root removed from the settings — fails the sync clearly)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...domain.ports import OutboundFetch, VersionedObjects
from .base import KINDS, ConnectorConfigError, Source
from .directory import DirectorySource, allowed_roots, confine
from .http import HttpFetcher, SitemapSource, UrlListSource, check_url
from .s3 import S3Source, check_s3_config


@dataclass(frozen=True)
class ConnectorLimits:
    max_item_bytes: int
    fetch_timeout_seconds: float
    max_items: int
    sitemap_max_depth: int
    directory_roots: str
    outbound_allow_networks: str
    s3: dict[str, Any]  # endpoint_url, region, access_key_id, secret_access_key, ...
    sitemap_max_bytes: int = 10 * 1024 * 1024  # one sitemap once decompressed


def validate_config(kind: str, config: dict[str, Any], limits: ConnectorLimits) -> dict[str, Any]:
    """The normalised configuration, or ConnectorConfigError (400) saying what is wrong."""
    if kind not in KINDS:
        raise ConnectorConfigError(f"unknown connector kind {kind!r}: one of {', '.join(KINDS)}")
    if not isinstance(config, dict):
        raise ConnectorConfigError("config must be an object")
    if kind == "urls":
        urls = config.get("urls")
        if not isinstance(urls, list) or not urls:
            raise ConnectorConfigError('a urls connector needs {"urls": ["https://...", ...]}')
        if len(urls) > limits.max_items:
            raise ConnectorConfigError(f"at most {limits.max_items} URLs per connector")
        return {"urls": list(dict.fromkeys(check_url(u) for u in urls))}
    if kind == "sitemap":
        return {"url": check_url(config.get("url"))}
    if kind == "directory":
        confine(config.get("path"), allowed_roots(limits.directory_roots))
        return {"path": str(config["path"]).strip()}
    bucket, prefix = check_s3_config(config)
    return {"bucket": bucket, "prefix": prefix}


def build_source(kind: str, config: dict[str, Any], limits: ConnectorLimits, http: OutboundFetch,
                 open_bucket: Callable[[str, str], VersionedObjects]) -> Source:
    """The source of a connector of ``kind``: URLs and sitemaps fetched through ``http``; an S3
    prefix read through ``open_bucket(bucket, prefix)`` (the server's S3 settings)."""
    if kind in ("urls", "sitemap"):
        fetcher = HttpFetcher(http, max_bytes=limits.max_item_bytes, timeout=limits.fetch_timeout_seconds)
        if kind == "urls":
            return UrlListSource(config.get("urls") or [], fetcher, max_items=limits.max_items)
        return SitemapSource(config.get("url", ""), fetcher, max_depth=limits.sitemap_max_depth,
                             max_items=limits.max_items, max_bytes=limits.sitemap_max_bytes)
    if kind == "directory":
        return DirectorySource(config.get("path", ""), allowed_roots(limits.directory_roots),
                               max_bytes=limits.max_item_bytes, max_items=limits.max_items)
    if kind == "s3":
        bucket, prefix = check_s3_config(config)
        return S3Source(open_bucket(bucket, prefix), max_bytes=limits.max_item_bytes, max_items=limits.max_items)
    raise ConnectorConfigError(f"unknown connector kind {kind!r}")

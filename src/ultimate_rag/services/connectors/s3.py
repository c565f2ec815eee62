"""``s3``: objects under a bucket prefix, read with the server's S3 connection settings through the
S3 storage adapter (admin only: the server's credentials may reach buckets users must not read).
An object's version is its LastModified time and ETag from the listing (LastModified alone has a
resolution of a second: a rewrite within it would look unchanged): an unchanged one is not
downloaded."""

from __future__ import annotations

from typing import Any

from ...domain.errors import PermanentError
from ...domain.ports import VersionedObjects
from .base import ConnectorConfigError, Fetched, ItemTooLargeError, Known, RemoteItem

_BUCKET_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789.-")


def check_s3_config(config: dict[str, Any]) -> tuple[str, str]:
    bucket, prefix = config.get("bucket"), config.get("prefix", "")
    if not isinstance(bucket, str) or not 3 <= len(bucket) <= 63 or not set(bucket) <= _BUCKET_CHARS:
        raise ConnectorConfigError("bucket must be a valid S3 bucket name")
    if not isinstance(prefix, str) or len(prefix) > 1024 or "\x00" in prefix or ".." in prefix.split("/"):
        raise ConnectorConfigError("prefix must be a string without '..' segments")
    return bucket, prefix.strip("/")


class S3Source:
    def __init__(self, storage: VersionedObjects, *, max_bytes: int, max_items: int) -> None:
        self._storage = storage  # an S3ObjectStorage rooted at bucket/prefix
        self._max_bytes = max_bytes
        self._max_items = max_items

    async def discover(self) -> list[RemoteItem]:
        found: list[RemoteItem] = []
        async for key, modified, etag in self._storage.list_versions(""):
            if key.endswith("/"):
                continue
            found.append(RemoteItem(key, key.rsplit("/", 1)[-1], f"{modified.isoformat()} {etag}".strip(), path=key))
            if len(found) >= self._max_items:
                break
        return found

    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched:
        if known is not None and known.last_modified and known.last_modified == item.version:
            return Fetched(None, None, known.last_modified)
        body = bytearray()
        try:
            async for block in self._storage.stream(item.external_id):
                body += block
                if len(body) > self._max_bytes:
                    raise ItemTooLargeError(f"{item.external_id} is larger than the limit of {self._max_bytes} bytes")
        except ValueError as exc:  # a key the adapter refuses to address
            raise PermanentError(f"{item.external_id} cannot be read: {exc}") from exc
        metadata = await self._storage.user_metadata(item.external_id)  # x-amz-meta-*: the document's s3 fields
        return Fetched(bytes(body), None, item.version, None, item.name, metadata)

"""What every connector kind provides: a bounded list of remote items, and a fetch of one item that
honours what the last sync learned about it (ETag, Last-Modified, a version stamp)."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol
from urllib.parse import unquote, urlsplit

from ...domain.errors import InvalidRequestError, PermanentError

KINDS = ("urls", "sitemap", "s3", "directory")
ADMIN_KINDS = frozenset({"directory", "s3"})  # they read with the server's own access


class ConnectorConfigError(InvalidRequestError):
    """The connector's configuration is invalid."""


class ItemTooLargeError(PermanentError):
    """The remote item is larger than the per-item limit."""


@dataclass(frozen=True)
class RemoteItem:
    external_id: str  # the URL, the S3 key, or the path relative to the directory
    name: str  # a filename hint (the last path segment)
    version: str | None = None  # what discovery already knows of its version (S3 LastModified, size:mtime)
    path: str | None = None  # where it lies in the folder or bucket (relative): the document's source.path


@dataclass(frozen=True)
class Fetched:
    """``content`` None: the remote says the item did not change (304, or the same version stamp)."""

    content: bytes | None
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    name: str | None = None
    metadata: dict[str, str] | None = None  # what the remote says of the item (S3 user metadata)


@dataclass(frozen=True)
class Known:
    """What the previous syncs recorded for an item (None: fetch unconditionally)."""

    etag: str | None = None
    last_modified: str | None = None


class Source(Protocol):
    async def discover(self) -> list[RemoteItem]: ...
    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched: ...


_EXT_BY_TYPE = {"text/html": ".html", "application/xhtml+xml": ".html", "text/markdown": ".md",
                "text/plain": ".txt", "application/pdf": ".pdf", "text/csv": ".csv",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx"}


def name_from_url(url: str) -> str:
    path = unquote(urlsplit(url).path or "")
    name = PurePosixPath(path).name
    return name or "index"


def with_extension(name: str, content_type: str | None) -> str:
    """A filename whose extension says what the content is, when the remote told us and the name does not."""
    if PurePosixPath(name).suffix:
        return name
    base = (content_type or "").split(";", 1)[0].strip().lower()
    ext = _EXT_BY_TYPE.get(base) or (mimetypes.guess_extension(base) if base else None)
    return f"{name}{ext}" if ext else name

"""``directory``: files under a server-side directory (admin only). The directory must lie inside
one of ``ULTIMATE_RAG_CONNECTOR_DIRECTORY_ROOTS``; symbolic links are never followed out of it
(every file's real path must stay under the directory's real path, and it is opened with
``O_NOFOLLOW``). A file's version is its size and modification time: an unchanged stamp is not
even read."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from ...domain.errors import PermanentError, ResourceNotFoundError
from .base import ConnectorConfigError, Fetched, ItemTooLargeError, Known, RemoteItem


def allowed_roots(spec: str) -> list[Path]:
    return [Path(p.strip()).resolve() for p in spec.split(",") if p.strip()]


def confine(path: object, roots: list[Path]) -> Path:
    """The directory's real path, refused unless it is inside a configured root."""
    if not roots:
        raise ConnectorConfigError("directory connectors are disabled: ULTIMATE_RAG_CONNECTOR_DIRECTORY_ROOTS is empty")
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise ConnectorConfigError("the directory path must be a non-empty string")
    given = Path(path.strip())
    if not given.is_absolute():
        raise ConnectorConfigError("the directory path must be absolute")
    try:
        real = given.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ConnectorConfigError("the directory path cannot be resolved") from exc
    if not any(real == root or real.is_relative_to(root) for root in roots):
        raise ConnectorConfigError("the directory is outside the configured connector directory roots")
    return real


class DirectorySource:
    def __init__(self, path: str, roots: list[Path], *, max_bytes: int, max_items: int) -> None:
        self._root = confine(path, roots)
        self._max_bytes = max_bytes
        self._max_items = max_items

    async def discover(self) -> list[RemoteItem]:
        return await asyncio.to_thread(self._walk)

    def _walk(self) -> list[RemoteItem]:
        if not self._root.is_dir():
            raise ResourceNotFoundError(f"the directory {self._root} does not exist")
        found: list[RemoteItem] = []
        for folder, dirs, files in os.walk(self._root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.startswith("."):
                    continue
                full = Path(folder) / name
                try:
                    real = full.resolve(strict=True)
                    info = real.stat()
                except OSError:
                    continue
                if not real.is_relative_to(self._root) or not stat.S_ISREG(info.st_mode):
                    continue  # a link out of the directory, a device, a socket: never read
                rel = full.relative_to(self._root).as_posix()
                found.append(RemoteItem(rel, name, f"{info.st_size}:{info.st_mtime_ns}"))
                if len(found) >= self._max_items:
                    return found
        return found

    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched:
        if known is not None and known.etag and known.etag == item.version:
            return Fetched(None, known.etag)
        content, version = await asyncio.to_thread(self._read, item.external_id)
        return Fetched(content, version, None, None, item.name)

    def _read(self, relative: str) -> tuple[bytes, str]:
        full = (self._root / relative).resolve(strict=False)
        if not full.is_relative_to(self._root):
            raise PermanentError("the file resolves outside the connector's directory")
        try:
            fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError as exc:
            raise ResourceNotFoundError(f"{relative} no longer exists") from exc
        except OSError as exc:
            raise PermanentError(f"{relative} cannot be read: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise PermanentError(f"{relative} is not a regular file")
            if info.st_size > self._max_bytes:
                raise ItemTooLargeError(f"{relative} is {info.st_size} bytes, over the limit of {self._max_bytes}")
            data = fh.read(self._max_bytes + 1)
        if len(data) > self._max_bytes:
            raise ItemTooLargeError(f"{relative} is larger than the limit of {self._max_bytes} bytes")
        return data, f"{info.st_size}:{info.st_mtime_ns}"

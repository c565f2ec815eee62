"""``directory``: files under a server-side directory (admin only). The directory must lie inside
one of ``ULTIMATE_RAG_CONNECTOR_DIRECTORY_ROOTS``. Symbolic links are never followed, and no path is
checked first and opened later (someone who can write in the directory could swap a checked parent
for a link in between): the directory is opened component by component from ``/`` with
``O_NOFOLLOW | O_DIRECTORY``, listed through that descriptor (``os.scandir`` on descriptors), and every file is
opened relative to it, one ``O_NOFOLLOW`` component at a time. A file's version is its size and
modification time: an unchanged stamp is not even read."""

from __future__ import annotations

import asyncio
import errno
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


_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO cannot hang it
MAX_DEPTH = 64  # directory levels listed below the connector's directory (one descriptor open per level)


class DirectorySource:
    def __init__(self, path: str, roots: list[Path], *, max_bytes: int, max_items: int) -> None:
        self._root = confine(path, roots)
        self._max_bytes = max_bytes
        self._max_items = max_items

    async def discover(self) -> list[RemoteItem]:
        return await asyncio.to_thread(self._walk)

    def _open_root(self) -> int:
        """A descriptor of the directory, reached from ``/`` without following any link (its real
        path was checked against the roots; a link put in its place since is refused, not followed)."""
        fd = os.open("/", _DIR_FLAGS)
        try:
            for part in self._root.parts[1:]:
                fd = _step(fd, part, _DIR_FLAGS)
        except FileNotFoundError as exc:
            raise ResourceNotFoundError(f"the directory {self._root} does not exist") from exc
        except OSError as exc:
            raise PermanentError(f"the directory {self._root} cannot be opened without following a link "
                                 f"({exc.strerror})") from exc
        return fd

    def _walk(self) -> list[RemoteItem]:
        found: list[RemoteItem] = []
        self._list(self._open_root(), "", found)
        return found

    def _list(self, dir_fd: int, prefix: str, found: list[RemoteItem]) -> None:
        """Regular files under ``dir_fd`` (closed here), depth first in name order; each
        subdirectory is opened relative to its parent with ``O_NOFOLLOW | O_DIRECTORY``."""
        try:
            with os.scandir(dir_fd) as it:
                entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
            subdirs: list[str] = []
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    subdirs.append(entry.name)
                elif stat.S_ISREG(info.st_mode):  # a link (in or out), a device, a socket: never read
                    found.append(RemoteItem(prefix + entry.name, entry.name, f"{info.st_size}:{info.st_mtime_ns}",
                                            path=prefix + entry.name))
                    if len(found) >= self._max_items:
                        return
            for name in subdirs if prefix.count("/") < MAX_DEPTH else ():
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                except OSError:
                    continue  # gone, or swapped for a link since it was listed
                self._list(sub, f"{prefix}{name}/", found)
                if len(found) >= self._max_items:
                    return
        finally:
            os.close(dir_fd)

    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched:
        if known is not None and known.etag and known.etag == item.version:
            return Fetched(None, known.etag)
        content, version = await asyncio.to_thread(self._read, item.external_id)
        return Fetched(content, version, None, None, item.name)

    def _read(self, relative: str) -> tuple[bytes, str]:
        parts = relative.split("/")
        if any(p in ("", ".", "..") or "\x00" in p for p in parts):
            raise PermanentError("the file resolves outside the connector's directory")
        fd = self._open_root()
        try:
            for part in parts[:-1]:
                fd = _step(fd, part, _DIR_FLAGS)
            fd = _step(fd, parts[-1], _FILE_FLAGS)
        except FileNotFoundError as exc:
            raise ResourceNotFoundError(f"{relative} no longer exists") from exc
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise PermanentError(f"{relative} is reached through a symbolic link, which is not followed") from exc
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


def _step(dir_fd: int, name: str, flags: int) -> int:
    """Open ``name`` inside ``dir_fd`` without following a link, and close ``dir_fd`` (also on failure)."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)

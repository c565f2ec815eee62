"""Object storage on the local filesystem (the embedded default). Writes are atomic: a temp file
in the same directory, fsynced, then renamed, so a reader never sees half an object."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

from ...domain.errors import ResourceNotFoundError
from ...offload import SMALL_WORK
from ..files import write_atomically


class LocalObjectStorage:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or "\\" in key or any(p in ("", ".", "..") for p in key.split("/")):
            raise ValueError(f"invalid object key: {key!r}")
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ValueError(f"invalid object key: {key!r}")
        return path

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        await asyncio.to_thread(write_atomically, self._path(key), data, temp_prefix=".tmp-")

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            if path.stat().st_size <= SMALL_WORK:  # from the page cache, as fast as the hop to a thread
                return path.read_bytes()
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError as exc:
            raise ResourceNotFoundError(f"source object {key} is missing from storage") from exc

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._path(key).is_file)

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._remove, self._path(key))

    def _remove(self, path: Path) -> None:
        """The object, then the document's directory when that is left empty (e.g. an upload's
        compensation): no empty directory per refused upload. Only that level: a knowledge base's
        directory may be gaining another document right now."""
        path.unlink(missing_ok=True)
        if path.parent.parent.parent == self.root:  # {kb}/{document}/{object}: the document's directory
            with contextlib.suppress(OSError):  # not empty, or gone already
                path.parent.rmdir()

    async def delete_prefix(self, prefix: str) -> int:
        path = self._path(prefix.rstrip("/"))
        if not path.exists():
            return 0
        count = sum(1 for p in path.rglob("*") if p.is_file())
        await asyncio.to_thread(shutil.rmtree, path, True)
        return count

    async def stream(self, key: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        path = self._path(key)
        if not path.is_file():
            raise ResourceNotFoundError(f"source object {key} is missing from storage")
        with path.open("rb") as fh:
            while True:
                block = await asyncio.to_thread(fh.read, chunk_size)
                if not block:
                    return
                yield block

    async def list_keys(self, prefix: str = "", batch: int = 1000) -> AsyncIterator[tuple[str, datetime]]:
        """Every stored key under ``prefix`` with its modification time (for the orphan sweeper).
        The tree is walked in a thread, ``batch`` entries at a time, so a large store never blocks
        the event loop nor sits in memory at once. Temp files of interrupted writes are listed too."""
        start = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        walker = self._walk(start)
        while True:
            found = await asyncio.to_thread(lambda: list(itertools.islice(walker, batch)))
            for item in found:
                yield item
            if len(found) < batch:
                return

    def _walk(self, start: Path) -> Iterator[tuple[str, datetime]]:
        for folder, _dirs, files in os.walk(start):
            for name in files:
                path = Path(folder) / name
                try:
                    modified = path.stat().st_mtime
                except FileNotFoundError:  # removed while we walked
                    continue
                yield path.relative_to(self.root).as_posix(), datetime.fromtimestamp(modified, UTC)

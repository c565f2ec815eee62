"""Chunk snapshots (SPEC §7): ``{root}/{kb_id}/{document_id}/chunks.json``, replaced atomically
(temp file in the same directory, fsync, rename); retries overwrite, nothing is appended.

``chunks.json`` is the published revision's snapshot. A rebuild writes its own beside it
(``chunks.r{N}.json``), which the READY commit's aftermath renames over ``chunks.json``; until then
(a crash in between included) ``load`` of the published revision finds it under its own name."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO
from uuid import UUID

import orjson

from ..files import write_atomically

TEMP_PREFIX = ".chunks-"  # write_atomically's temp files: ".chunks-XXXX.tmp" next to chunks.json


class FilesystemChunkSnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, knowledge_base_id: UUID, document_id: UUID) -> Path:
        return self.root / str(knowledge_base_id) / str(document_id) / "chunks.json"

    def revision_path(self, knowledge_base_id: UUID, document_id: UUID, revision: int) -> Path:
        return self.path(knowledge_base_id, document_id).with_name(f"chunks.r{int(revision)}.json")

    async def save(self, *, knowledge_base_id: UUID, document_id: UUID, snapshot: dict[str, Any],
                   revision: int | None = None) -> None:
        """``revision``: a revision being built, written beside the published snapshot."""
        data = orjson.dumps(snapshot, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
        path = (self.path(knowledge_base_id, document_id) if revision is None
                else self.revision_path(knowledge_base_id, document_id, revision))
        await asyncio.to_thread(write_atomically, path, data, temp_prefix=TEMP_PREFIX)

    async def publish(self, knowledge_base_id: UUID, document_id: UUID, revision: int) -> None:
        """After the swap: the revision's snapshot becomes ``chunks.json``; other revisions' go."""
        await asyncio.to_thread(self._publish, knowledge_base_id, document_id, revision)

    def _publish(self, knowledge_base_id: UUID, document_id: UUID, revision: int) -> None:
        built = self.revision_path(knowledge_base_id, document_id, revision)
        with contextlib.suppress(FileNotFoundError):
            os.replace(built, self.path(knowledge_base_id, document_id))
        self.prune(knowledge_base_id, document_id, lambda n: n < revision)  # a newer one is a newer rebuild's

    def prune(self, knowledge_base_id: UUID, document_id: UUID, drop: Callable[[int], bool],
              older_than: float | None = None) -> list[str]:
        """Remove the snapshots of the revisions ``drop`` says (only those modified before the epoch
        time ``older_than`` when given); returns what was removed."""
        removed = []
        for path in self.path(knowledge_base_id, document_id).parent.glob("chunks.r*.json"):
            number = path.name[len("chunks.r"):-len(".json")]
            if not number.isdigit() or not drop(int(number)):
                continue
            with contextlib.suppress(FileNotFoundError):
                if older_than is None or path.stat().st_mtime <= older_than:
                    path.unlink()
                    removed.append(str(path))
        return removed

    def temp_files(self, knowledge_base_id: UUID, document_id: UUID) -> list[Path]:
        """Temp files of writes that never finished (the writer was killed before its rename)."""
        return sorted(self.path(knowledge_base_id, document_id).parent.glob(f"{TEMP_PREFIX}*.tmp"))

    async def load(self, knowledge_base_id: UUID, document_id: UUID, revision: int | None = None) -> bytes | None:
        """``revision``'s own snapshot if it is there (not yet renamed, or never published), else
        ``chunks.json``."""
        paths = [self.path(knowledge_base_id, document_id)]
        if revision is not None:
            paths.insert(0, self.revision_path(knowledge_base_id, document_id, revision))
        for path in paths:
            try:
                return await asyncio.to_thread(path.read_bytes)
            except FileNotFoundError:
                continue
        return None

    async def open_blocks(self, knowledge_base_id: UUID, document_id: UUID, revision: int | None = None,
                          block_size: int = 1 << 20) -> AsyncIterator[bytes] | None:
        """``load``'s snapshot in blocks of ``block_size`` bytes (None: there is none). The file is
        open before this returns: a rename over it meanwhile does not change what is read."""
        paths = [self.path(knowledge_base_id, document_id)]
        if revision is not None:
            paths.insert(0, self.revision_path(knowledge_base_id, document_id, revision))
        for path in paths:
            try:
                handle = await asyncio.to_thread(open, path, "rb")
            except FileNotFoundError:
                continue
            return _blocks(handle, block_size)
        return None

    async def delete_document(self, knowledge_base_id: UUID, document_id: UUID) -> None:
        await asyncio.to_thread(shutil.rmtree, self.path(knowledge_base_id, document_id).parent, True)

    async def delete_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await asyncio.to_thread(shutil.rmtree, self.root / str(knowledge_base_id), True)


async def _blocks(handle: BinaryIO, block_size: int) -> AsyncIterator[bytes]:
    try:
        while block := await asyncio.to_thread(handle.read, block_size):
            yield block
    finally:
        handle.close()

"""Chunk snapshots (SPEC §7): ``{root}/{kb_id}/{document_id}/chunks.json``, replaced atomically
(temp file in the same directory, fsync, rename); retries overwrite, nothing is appended."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any
from uuid import UUID

from ..files import write_atomically

SNAPSHOT_FORMAT_VERSION = 1
TEMP_PREFIX = ".chunks-"  # write_atomically's temp files: ".chunks-XXXX.tmp" next to chunks.json


class FilesystemChunkSnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, knowledge_base_id: UUID, document_id: UUID) -> Path:
        return self.root / str(knowledge_base_id) / str(document_id) / "chunks.json"

    async def save(self, *, knowledge_base_id: UUID, document_id: UUID, snapshot: dict[str, Any]) -> None:
        data = json.dumps(snapshot, ensure_ascii=False, indent=1, default=str).encode("utf-8")
        await asyncio.to_thread(write_atomically, self.path(knowledge_base_id, document_id), data,
                                temp_prefix=TEMP_PREFIX)

    def temp_files(self, knowledge_base_id: UUID, document_id: UUID) -> list[Path]:
        """Temp files of writes that never finished (the writer was killed before its rename)."""
        return sorted(self.path(knowledge_base_id, document_id).parent.glob(f"{TEMP_PREFIX}*.tmp"))

    async def load(self, knowledge_base_id: UUID, document_id: UUID) -> bytes | None:
        path = self.path(knowledge_base_id, document_id)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def delete_document(self, knowledge_base_id: UUID, document_id: UUID) -> None:
        await asyncio.to_thread(shutil.rmtree, self.path(knowledge_base_id, document_id).parent, True)

    async def delete_knowledge_base(self, knowledge_base_id: UUID) -> None:
        await asyncio.to_thread(shutil.rmtree, self.root / str(knowledge_base_id), True)

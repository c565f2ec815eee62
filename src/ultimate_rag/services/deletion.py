"""The delete pipeline (SPEC §6, seed 004): PENDING -> DELETING -> DELETED (soft: chunks, vectors,
assets and the chunk snapshot removed, the source object kept, so a reindex brings the document
back) or the row gone (hard: the source object too). Runs through the queue like ingestion, with
the same lease, fencing and retries; every removal is idempotent, so a retry after a crash
finishes the job."""

from __future__ import annotations

import logging

from ..adapters.postgres import deletion as repo
from ..adapters.postgres.database import Connection
from ..adapters.postgres.queue import JobQueue
from ..domain.errors import ResourceNotFoundError
from ..domain.models import Lease
from ..domain.ports import ChunkSnapshotStore, ObjectStorage, VectorStore
from ..domain.status import DocumentStatus as S
from .knowledge_base_removal import KnowledgeBaseRemoval

log = logging.getLogger(__name__)


class DocumentDeleter:
    def __init__(self, *, queue: JobQueue, storage: ObjectStorage, vectors: VectorStore,
                 snapshots: ChunkSnapshotStore, knowledge_bases: KnowledgeBaseRemoval) -> None:
        self._queue = queue
        self._knowledge_bases = knowledge_bases
        self._storage = storage
        self._vectors = vectors
        self._snapshots = snapshots

    async def process(self, lease: Lease) -> None:
        row = await self._queue.load_document_row(lease.document_id)
        if row is None:
            raise ResourceNotFoundError("the document no longer exists")
        await self._queue.enter_stage(lease, S.DELETING)
        kb_id, doc_id, hard = row["knowledge_base_id"], row["id"], lease.force

        async def remove_outside(conn: Connection) -> None:
            await self._vectors.delete_by_document(doc_id)
            for key in await repo.asset_keys(conn, doc_id):
                await self._storage.delete(key)
            await self._snapshots.delete_document(kb_id, doc_id)
            if hard:
                # everything stored under the document's prefix: every source revision and asset
                await self._storage.delete_prefix(f"{kb_id}/{doc_id}/")

        await self._queue.complete_delete(lease, hard=hard, remove_outside=remove_outside)
        log.info("document %s %s deleted", doc_id, "hard" if hard else "soft")
        if hard and row["kb_deleting"]:
            await self._knowledge_bases.finish_if_empty(kb_id)

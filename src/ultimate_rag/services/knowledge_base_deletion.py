"""Removing a whole knowledge base (SPEC §6): its documents go through the queue as hard deletes,
and the knowledge base itself disappears when the last of them is gone. Until then it is flagged
``deleting``: uploads into it get 409 and search in it returns nothing."""

from __future__ import annotations

import logging
from uuid import UUID

from ..domain.ports import ChunkSnapshotStore, KnowledgeBaseDeletionStore, ObjectStorage, VectorStore

log = logging.getLogger(__name__)


class KnowledgeBaseDeletion:
    def __init__(self, *, repository: KnowledgeBaseDeletionStore, storage: ObjectStorage,
                 vectors: VectorStore, snapshots: ChunkSnapshotStore) -> None:
        self._repo = repository
        self._storage = storage
        self._vectors = vectors
        self._snapshots = snapshots

    async def request(self, knowledge_base_id: UUID) -> int:
        """Flag the knowledge base and queue a hard delete of each document; returns how many."""
        await self._repo.mark_deleting(knowledge_base_id)
        queued = await self._repo.queue_document_deletes(knowledge_base_id)
        await self.finish_if_empty(knowledge_base_id)
        return queued

    async def finish_if_empty(self, knowledge_base_id: UUID) -> bool:
        async def remove_leftovers() -> None:
            await self._vectors.delete_by_knowledge_base(knowledge_base_id)
            await self._snapshots.delete_knowledge_base(knowledge_base_id)
            await self._storage.delete_prefix(f"{knowledge_base_id}/")

        done = await self._repo.drop_if_empty(knowledge_base_id, remove_leftovers)
        if done:
            log.info("knowledge base %s removed", knowledge_base_id)
        return done

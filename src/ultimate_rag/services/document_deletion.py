"""The delete pipeline (SPEC §6, seed 004): PENDING -> DELETING -> DELETED (soft: chunks, vectors,
assets and the chunk snapshot removed, the source object kept, so a reindex brings the document
back) or the row gone (hard: the source object too). Runs through the queue like ingestion, with
the same lease, fencing and retries; every removal is idempotent, so a retry after a crash
finishes the job."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..domain.errors import ResourceNotFoundError
from ..domain.models import Lease
from ..domain.ports import ChunkSnapshotStore, ObjectStorage, PipelineStore, VectorStore
from ..domain.status import DocumentStatus as S
from .knowledge_base_deletion import KnowledgeBaseDeletion

log = logging.getLogger(__name__)


class DocumentDeletion:
    def __init__(self, *, store: PipelineStore, storage: ObjectStorage, vectors: VectorStore,
                 snapshots: ChunkSnapshotStore, knowledge_bases: KnowledgeBaseDeletion) -> None:
        self._store = store
        self._knowledge_bases = knowledge_bases
        self._storage = storage
        self._vectors = vectors
        self._snapshots = snapshots

    async def process(self, lease: Lease) -> None:
        doc = lease.document or await self._store.load_document(lease.document_id)  # read by the claim
        if doc is None:
            raise ResourceNotFoundError("the document no longer exists")
        await self._store.enter_stage(lease, S.DELETING)
        kb_id, doc_id, hard = doc.knowledge_base_id, doc.id, lease.force

        async def remove_outside(asset_keys: Sequence[str]) -> None:
            await self._vectors.delete_by_document(doc_id)
            for key in asset_keys:
                await self._storage.delete(key)
            await self._snapshots.delete_document(kb_id, doc_id)
            if hard:
                # everything stored under the document's prefix: every source revision and asset
                await self._storage.delete_prefix(f"{kb_id}/{doc_id}/")

        await self._store.commit_deleted(lease, hard=hard, remove_outside=remove_outside)
        log.info("document %s %s deleted", doc_id, "hard" if hard else "soft")
        if hard and doc.kb_deleting:
            await self._knowledge_bases.finish_if_empty(kb_id)

"""The READY commit, step by step (SPEC §4 rule 2: READY is the commit flag). The pipeline store runs
it in one transaction (``PipelineStore.commit_ready``, adapters/postgres/pipeline.py); steps 3 and 9
are this module's, and the store calls them at their place:

1. an older twin to outdate (deduplication's ``Decision.outdate``): its knowledge base's
   deduplication lock, before any row lock;
2. the fence: the job row (still this lease's), then the document row; READY allowed;
3. ``write_vectors``: the new revision's vectors into each generation the plan names (the current
   one with the sparse side; a running migration's target), committed on their own beside the
   published ones while the transaction holds the job row: a search straddling the swap finds one
   revision or the other, never neither;
4. the older twin OUTDATED and its vectors removed;
5. to 8. the new revision's chunk rows in, every other asset row out, the document READY with
   ``published_revision``, the job SUCCEEDED: one statement, which also reads the knowledge base's
   index state (its settings and running migration);
9. ``finish``, inside that transaction: the plan checked against that index state (a migration
   that switched to a generation this run did not write: roll back, index again), the language
   centroids added (a row every document of the language shares: locked only for the commit), and
   the revision's chunk snapshot renamed over ``chunks.json``.

After the commit, ``after_swap``: the previous revision's vectors (in each generation live at the
commit) and the stale asset objects go; a failure or a crash there leaves them to the janitor."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from ..domain.embedding_models import Generation, IndexPlan
from ..domain.errors import TransientError
from ..domain.lexical import LexicalShare
from ..domain.models import EmbeddedChunk, IndexState, PipelineDocument, ReadyOutcome
from ..domain.ports import CentroidStore, ChunkSnapshotStore, IndexRouter, ObjectStorage

log = logging.getLogger(__name__)
VectorWrites = Sequence[tuple[Generation, Sequence[EmbeddedChunk]]]


@dataclass(frozen=True)
class Publication:
    """What one run publishes: its document, the plan it embedded for, the vectors of each
    generation (the plan's current one first) and the model those of the current one are from."""

    document: PipelineDocument
    plan: IndexPlan
    writes: VectorWrites
    model: str

    @property
    def current(self) -> Sequence[EmbeddedChunk]:
        return self.writes[0][1]

    @property
    def lexical_share(self) -> LexicalShare:
        """The revision's share of its knowledge base's BM25 statistics (added when it is published)."""
        return LexicalShare.of(self.document.id, self.document.content_revision,
                               [i.lexical for i in self.current if i.lexical is not None])


class ReadyCommitSteps:
    def __init__(self, *, indexes: IndexRouter, snapshots: ChunkSnapshotStore, storage: ObjectStorage,
                 centroids: CentroidStore | None = None) -> None:
        self._indexes = indexes
        self._snapshots = snapshots
        self._storage = storage
        self._centroids = centroids

    async def write_vectors(self, publication: Publication) -> None:
        """Step 3."""
        await self._indexes.write(publication.plan.knowledge_base_id, publication.writes, publication.lexical_share)

    async def finish(self, publication: Publication, within: object, state: IndexState | None) -> None:
        """Step 9, given the open transaction and the index state it read (None: read here)."""
        doc = publication.document
        await self.check_plan(publication, state)  # first: nothing is published for a generation no longer current
        if self._centroids is not None:
            await self._centroids.add(doc.knowledge_base_id, publication.model, publication.current,
                                      document=(doc.id, doc.content_revision), within=within)
        await self._snapshots.publish(doc.knowledge_base_id, doc.id, doc.content_revision)

    async def check_plan(self, publication: Publication, state: IndexState | None) -> IndexPlan:
        """The plan as it is now; a ``TransientError`` when the knowledge base switched to a
        generation this run did not write (a migration that began and ended while it ran)."""
        now = await self._plan_now(publication.plan.knowledge_base_id, state)
        if now.current not in [g for g, _ in publication.writes]:
            raise TransientError("the knowledge base switched to another embedding model while this document was "
                                 "indexed; it is indexed again with the new model")
        return now

    async def after_swap(self, publication: Publication, outcome: ReadyOutcome, *, superseded: bool) -> None:
        """The previous revision's vectors (all but this run's chunks, in each generation live at the
        commit) and the stale asset objects. ``superseded`` False: the document's first publication
        by its job's first attempt has no other vectors to remove (every failed attempt before
        removed its own; what a killed earlier job may have left is never served and is the
        janitor's), so that statement is not sent."""
        doc = publication.document
        try:
            if superseded:
                live = (await self._plan_now(doc.knowledge_base_id, outcome.index_state)).generations
                await self._indexes.remove_superseded(doc.knowledge_base_id, doc.id,
                                                      [item.chunk.id for item in publication.current], live)
            for key in outcome.stale_assets:
                await self._storage.delete(key)
        except Exception:
            log.exception("could not remove the previous revision of %s; the janitor will", doc.id)

    async def _plan_now(self, knowledge_base_id: UUID, state: IndexState | None) -> IndexPlan:
        """The plan from the index state the commit read (no read), or read now."""
        if state is not None:
            return self._indexes.plan_from(knowledge_base_id, state)
        return await self._indexes.plan(knowledge_base_id)

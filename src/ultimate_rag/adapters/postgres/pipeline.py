"""The pipeline's repository (SPEC §4, §5): what a job reads and writes for its document, every
write fenced by the job queue's lease (``JobQueue.fenced``, ``JobQueue.fenced_update``): stage
changes, progress, parser and warnings, asset rows, the READY commit (the revision swap, and
deduplication's outdating of an older twin) and the DELETED commit. The statements are in
``pipeline.sql``; the fencing stays the queue's, written once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol
from uuid import UUID

from psycopg.types.json import Jsonb

from ...domain.errors import LeaseLostError
from ...domain.identifiers import chunk_identifiers
from ...domain.metadata import PARSED
from ...domain.models import (
    Chunk,
    DocumentAsset,
    IndexState,
    Lease,
    OlderTwin,
    PipelineDocument,
    ReadyCommit,
    ReadyOutcome,
)
from ...domain.status import DocumentStatus, check_transition, sources_of
from . import dedup, deletion, rows
from .batching import GroupedCalls
from .database import Connection, SharedTransaction
from .documents import published_chunk_ids
from .queue import JobQueue, fenced_document_update
from .sql import load_queries

Q = load_queries("pipeline.sql")
# the fenced document updates: the queue's one fencing statement, four ways to change the document
_SET_STAGE, _SET_PROGRESS, _START_PARSING, _SET_WARNINGS = (
    fenced_document_update(Q[name]) for name in ("set_stage", "set_progress", "start_parsing", "set_warnings"))
Step = Callable[[], Awaitable[None]]
TransactionStep = Callable[[SharedTransaction, IndexState | None], Awaitable[None]]


class DocumentVectors(Protocol):
    """What the READY commit needs of the vector store: an outdated twin's vectors go."""

    async def delete_by_document(self, document_id: UUID) -> None: ...


class PipelineRepository:
    """``ports.PipelineStore`` on PostgreSQL. ``vectors``: where an outdated twin's vectors are
    removed, inside the READY commit that outdates it."""

    def __init__(self, queue: JobQueue, vectors: DocumentVectors) -> None:
        self._queue = queue
        self._vectors = vectors
        self._completions: GroupedCalls[Lease, bool] = GroupedCalls(self._complete_ready_jobs)

    async def load_document(self, document_id: UUID) -> PipelineDocument | None:
        row = await self._queue.db.fetchone(Q["load_document"], {"document_id": document_id})
        return None if row is None else rows.pipeline_document(row)

    # -- one fenced statement each ------------------------------------------------------------
    async def enter_stage(self, lease: Lease, status: DocumentStatus, progress: dict[str, Any] | None = None) -> None:
        """Status before action: commit the stage before its work starts; clears a stale error.
        Entering PARSING starts a new run, so the stage timings start over."""
        await self._queue.fenced_update(lease, _SET_STAGE, {"status": status.value, "progress": Jsonb(progress or {})},
                                        sources_of(status))

    async def report_progress(self, lease: Lease, progress: dict[str, Any]) -> None:
        await self._queue.fenced_update(lease, _SET_PROGRESS, {"progress": Jsonb(progress)})

    async def start_parsing(self, lease: Lease, parser_name: str, parser_version: str) -> None:
        """PARSING, as ``enter_stage``, with the parser about to run and no warnings yet (a failed
        parse leaves none behind), in the one fenced statement."""
        await self._queue.fenced_update(lease, _START_PARSING, {
            "status": DocumentStatus.PARSING.value, "progress": Jsonb({}), "name": parser_name,
            "version": parser_version}, sources_of(DocumentStatus.PARSING))

    async def record_warnings(self, lease: Lease, warnings: Sequence[str]) -> None:
        await self._queue.fenced_update(lease, _SET_WARNINGS, {"warnings": Jsonb(list(warnings))})

    async def replace_assets(self, lease: Lease, assets: Sequence[DocumentAsset], revision: int) -> list[str]:
        async with self._queue.fenced(lease) as (conn, _):
            return await replace_asset_rows(conn, lease.document_id, assets, revision)

    # -- the commits ----------------------------------------------------------------------------
    async def commit_ready(self, lease: Lease, commit: ReadyCommit, *, write_vectors: Step,
                           finish: TransactionStep) -> ReadyOutcome:
        """INDEXING -> READY: the revision swap. Every step, in order, in one transaction:

        1. an older twin to outdate (``commit.outdate``): its knowledge base's deduplication lock,
           before any row lock (deduplication's judging takes it first too);
        2. the fencing: the job row, still this lease's, then the document row; READY allowed;
        3. ``write_vectors``: the new revision's vectors, beside the published ones, committed on
           their own (a search straddling this commit then finds one revision or the other) while
           this transaction holds the job row, so no other worker can own the job meanwhile;
        4. the older twin becomes OUTDATED (its job row, then its document row; its chunks and
           hash bands go) and its vectors are removed;
        5. the document's chunk rows become the new revision's;
        6. every asset row but the revision's own (``commit.assets``) goes (their object keys
           are returned);
        7. the document becomes READY with ``published_revision = commit.revision``: READY is the
           commit flag (SPEC §4 rule 2), written with the facts it vouches for (its stage
           timestamps are returned);
        8. the job SUCCEEDED (5-8: one statement, ``publish_revision``, which also reads the
           knowledge base's index state: its settings and running migration);
        9. ``finish``, given this transaction (``SharedTransaction``) and that index state, the
           last step before the commit (raising rolls everything back): what must be
           there when READY is seen but locks a row other documents share (the language
           centroids: held only for the commit), and the revision's chunk snapshot renamed over
           ``chunks.json``.

        Search sees the old revision or the new one, never a mix or nothing. After the commit the
        caller removes the previous revision's vectors and the returned objects (a crash first
        leaves them to the janitor)."""
        twin = commit.outdate
        document = {"document_id": lease.document_id}
        async with lease.end.writing():  # a renewal refused from here on may be this commit's own end
            async with self._queue.fenced(lease, dedup.lock_name(twin.knowledge_base_id) if twin else None) as (
                    conn, current):
                check_transition(current, DocumentStatus.READY)
                async with self._queue.db.kept_open(conn):
                    await write_vectors()
                if twin is not None:
                    await self._outdate_twin(conn, twin, newer=lease.document_id)
                published = await (await conn.execute(Q["publish_revision"], {
                    **document, "job_id": lease.job_id, "revision": commit.revision, "keep": list(commit.assets),
                    "chunks": Jsonb([_chunk_row(c) for c in commit.chunks]), "parsed_keys": list(PARSED),
                    "properties": Jsonb(commit.properties)})).fetchone()
                assert published is not None  # one row, always
                state = rows.index_state(published)
                await finish(SharedTransaction(self._queue.db.url, conn), state)
            lease.end.finished()  # committed: the job is SUCCEEDED, its cleanup is the caller's
            return ReadyOutcome(tuple(published["stale"]), dict(published["stage_timings"] or {}),
                                published["previous_revision"], state)

    async def _outdate_twin(self, conn: Connection, twin: OlderTwin, *, newer: UUID) -> None:
        """Deduplication's statements (``dedup.sql``) on this commit's transaction; a twin that can
        no longer be outdated (deleted, re-uploaded meanwhile) is left as it is."""
        if await dedup.outdate(conn, older=twin.document_id, newer=newer, verdict=twin.verdict):
            async with self._queue.db.kept_open(conn):
                await self._vectors.delete_by_document(twin.document_id)

    async def complete_already_ready(self, lease: Lease) -> None:
        """The job of a document that is READY already ends: only the job changes. Concurrent
        completions share one statement (each still fenced on its own lease)."""
        async with lease.end.writing():
            if await self._completions.submit(lease):
                lease.end.finished()
                return
            owned, current = await self._queue.lease_state(lease)
            if not owned:
                raise LeaseLostError()
            raise LeaseLostError(f"document is {current}, not READY")

    async def _complete_ready_jobs(self, leases: list[Lease]) -> list[bool]:
        ended = {r["id"] for r in await self._queue.db.fetchall(Q["complete_ready_jobs"], {
            "job_ids": [x.job_id for x in leases], "worker_ids": [x.worker_id for x in leases],
            "attempts": [x.attempt for x in leases]})}
        return [x.job_id in ended for x in leases]

    async def commit_deleted(self, lease: Lease, *, hard: bool,
                             remove_outside: Callable[[Sequence[str]], Awaitable[None]]) -> None:
        """DELETING -> DELETED (soft: the row stays, its derived data goes) or the row is gone (hard).
        ``remove_outside`` gets the document's asset object keys and removes vectors, objects and
        the snapshot while the job row is locked."""
        async with lease.end.writing():
            async with self._queue.fenced(lease) as (conn, current):
                check_transition(current, DocumentStatus.DELETED)
                keys = await deletion.asset_keys(conn, lease.document_id)
                async with self._queue.db.kept_open(conn):
                    await remove_outside(keys)
                document = {"document_id": lease.document_id}
                if hard:
                    await conn.execute(Q["delete_document"], document)
                else:
                    for name in ("delete_chunks", "delete_assets", "delete_hash_bands", "document_deleted"):
                        await conn.execute(Q[name], document)
                    await conn.execute(Q["succeed_job"], {"job_id": lease.job_id})
            lease.end.finished()

    async def published_chunk_ids(self, document_id: UUID) -> list[UUID]:
        """The chunks search may serve for this document (empty when it has no published revision)."""
        return await published_chunk_ids(self._queue.db, document_id)


def _chunk_row(chunk: Chunk) -> dict[str, Any]:
    """A chunk as ``publish_revision`` reads its rows (``jsonb_to_recordset``)."""
    return {"id": str(chunk.id), "document_id": str(chunk.document_id),
            "knowledge_base_id": str(chunk.knowledge_base_id), "ordinal": chunk.ordinal, "content": chunk.content,
            "token_count": chunk.token_count, "heading_path": list(chunk.heading_path),
            "locator": chunk.locator.to_metadata(), "metadata": chunk.metadata,
            "identifiers": list(chunk.identifiers if chunk.identifiers is not None
                                else chunk_identifiers(chunk.content, chunk.heading_path))}


async def replace_asset_rows(conn: Connection, document_id: UUID, assets: Sequence[DocumentAsset],
                             revision: int | None = None) -> list[str]:
    """Swap the asset rows of one revision of the document (default: its current one; those of the
    published revision stay until the READY commit); returns the object keys no longer referenced."""
    if revision is None:
        row = await (await conn.execute(Q["content_revision"], {"document_id": document_id})).fetchone()
        revision = row["content_revision"] if row else 1
    params = {"document_id": document_id, "revision": revision}
    old = await (await conn.execute(Q["delete_revision_assets"], params)).fetchall()
    async with conn.cursor() as cur:
        await cur.executemany(
            Q["insert_asset"],
            [(a.id, a.document_id, a.knowledge_base_id, revision, a.object_key, a.mime_type, a.size_bytes, a.page,
              a.description, a.locator_key) for a in assets],
        )
    keep = {a.object_key for a in assets}
    return [r["object_key"] for r in old if r["object_key"] not in keep]

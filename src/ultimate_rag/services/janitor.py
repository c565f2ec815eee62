"""The orphan sweeper (``ultimate-rag janitor``, and periodically inside each worker).

A crash between storing and committing leaves things no database row owns: a source object whose
document was never created, an old revision after a re-upload, a stale asset, the temp file of an
interrupted write, a chunk snapshot of a document or knowledge base that is gone, vectors of a
document that is not READY, and a rebuild's leftovers (vectors, asset objects, snapshots of a revision
that is neither published nor being built). They are invisible to users (search keeps the chunks of
published revisions only) but
they cost storage and confuse operators, so they are removed here, under three rules:

* one sweeper at a time, across every process and machine (a PostgreSQL advisory lock);
* files are judged on their modification time: nothing younger than the grace period is touched,
  which covers an upload that stored its bytes and is about to commit its row;
* nothing a live job is writing is touched: a document whose job is RUNNING (or that is being
  uploaded or fetched) keeps everything; its row is share-locked while its unowned objects are
  removed, so no stage can begin meanwhile; vectors are removed only while the document's job is
  locked and not running, so no worker can claim it and make it READY in between.

The same pass keeps the embedding cache at its size bound (ULTIMATE_RAG_EMBEDDING_CACHE_MAX_ENTRIES),
evicting the least recently used entries in batches: off the ingest path, which only inserts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

from ..domain.ports import (
    EmbeddingCacheStore,
    GenerationSweeper,
    MaintenanceStore,
    ObjectOwner,
    ObjectStorage,
    SweptSnapshots,
)
from ..domain.status import DocumentStatus
from .outages import OutageLog

log = logging.getLogger(__name__)
# being written by something that holds no lock we could see: keep everything of these documents
_INTAKE = frozenset({DocumentStatus.UPLOADING.value, DocumentStatus.FETCHING.value})


@dataclass
class SweepReport:
    ran: bool = True
    objects: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)  # "kb_id" (whole knowledge base) or "kb_id/doc_id"
    temp_files: list[str] = field(default_factory=list)  # temp files of interrupted snapshot writes
    vectors: dict[UUID, int] = field(default_factory=dict)  # vectors removed per document
    cache_entries: int = 0  # embedding cache entries evicted (least recently used, beyond the bound)
    generations: list[str] = field(default_factory=list)  # index generations nothing uses
    errors: list[str] = field(default_factory=list)

    @property
    def removed_anything(self) -> bool:
        return bool(self.objects or self.snapshots or self.temp_files or self.vectors or self.cache_entries
                    or self.generations)

    def summary(self) -> str:
        if not self.ran:
            return "another janitor pass holds the lock; nothing was done"
        text = (f"removed {len(self.objects)} orphaned object(s), {len(self.snapshots)} chunk snapshot "
                f"directory(ies), {sum(self.vectors.values())} vector(s) of {len(self.vectors)} document(s), "
                f"{len(self.temp_files)} temp file(s) of interrupted writes, {self.cache_entries} embedding cache "
                f"entry(ies), {len(self.generations)} orphaned index generation(s)")
        return text + (f"; {len(self.errors)} part(s) failed: " + "; ".join(self.errors) if self.errors else "")


class Janitor:
    def __init__(self, *, maintenance: MaintenanceStore, storage: ObjectStorage, snapshots: SweptSnapshots,
                 vector_table: str | None, grace_seconds: float, batch_size: int = 500,
                 cache: EmbeddingCacheStore | None = None, cache_max_entries: int = 0,
                 generations: GenerationSweeper | None = None) -> None:
        """``vector_table``: pgvector's table, whose orphan vectors are swept (None: Milvus or
        Qdrant, whose leftovers are never served); ``generations``: sweeps index generations
        nothing uses (the embedding-model migrations)."""
        self._maintenance = maintenance
        self.generations = generations
        self._cache = cache
        self.cache_max_entries = cache_max_entries
        self._storage = storage
        self._snapshots = snapshots
        self._vector_table = vector_table
        self.grace_seconds = grace_seconds
        self._batch_size = batch_size

    def with_grace(self, grace_seconds: float | None) -> Janitor:
        """The same sweeper with another grace period (``janitor --grace-seconds``); None: this one."""
        if grace_seconds is None:
            return self
        return Janitor(maintenance=self._maintenance, storage=self._storage, snapshots=self._snapshots,
                       vector_table=self._vector_table, grace_seconds=grace_seconds, batch_size=self._batch_size,
                       cache=self._cache, cache_max_entries=self.cache_max_entries, generations=self.generations)

    async def sweep(self) -> SweepReport:
        """One pass, or nothing when another process holds the sweep lock. A part that fails is
        reported and the others still run."""
        async with self._maintenance.exclusive() as locked:
            if not locked:
                return SweepReport(ran=False)
            report = SweepReport()
            cutoff = datetime.now(UTC) - timedelta(seconds=self.grace_seconds)
            for name, part in (("objects", self._sweep_objects), ("snapshots", self._sweep_snapshots),
                               ("vectors", self._sweep_vectors), ("embedding cache", self._evict_cache),
                               ("index generations", self._sweep_generations)):
                try:
                    await part(report, cutoff)
                except Exception as exc:
                    log.exception("janitor: sweeping %s failed", name)
                    report.errors.append(f"{name}: {exc.__class__.__name__}: {exc}")
            return report

    async def run_periodically(self, interval: float, stop: asyncio.Event,
                               observe: Callable[[SweepReport], None] | None = None) -> None:
        """Sweep every ``interval`` seconds until ``stop`` (workers); the first pass comes after a
        random part of the interval so that workers started together do not all try at once."""
        delay = interval * random.uniform(0.2, 1.0)
        outage = OutageLog("janitor pass", log)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
                return
            delay = interval
            try:
                report = await self.sweep()
            except Exception as exc:
                outage.failed(exc)
                continue
            outage.succeeded()
            if observe is not None:
                observe(report)
            if report.removed_anything or report.errors:
                log.info("janitor: %s", report.summary())

    async def _sweep_generations(self, report: SweepReport, cutoff: datetime) -> None:
        """Index generations that no knowledge base serves, builds or is about to drop (an abort
        that raced a worker's write, a crash between a switch and its drop)."""
        if self.generations is not None:
            report.generations.extend(await self.generations.sweep_orphans())

    # -- objects -------------------------------------------------------------------------------
    async def _sweep_objects(self, report: SweepReport, cutoff: datetime) -> None:
        batch: list[tuple[str, UUID]] = []
        async for key, modified in self._storage.list_keys(""):
            document_id = document_of(key)
            if document_id is None or modified > cutoff:
                continue
            batch.append((key, document_id))
            if len(batch) >= self._batch_size:
                await self._remove_unowned(batch, report)
                batch = []
        if batch:
            await self._remove_unowned(batch, report)

    async def _remove_unowned(self, batch: list[tuple[str, UUID]], report: SweepReport) -> None:
        async with self._maintenance.owners([doc for _, doc in batch]) as owners:
            for key, document_id in batch:
                if document_id in owners.busy:
                    continue
                owner = owners.locked.get(document_id)
                if owner is not None and keeps(owner, key):
                    continue
                await self._storage.delete(key)
                report.objects.append(key)
                log.info("janitor: removed object %s (%s)", key,
                         "no such document" if owner is None else "not owned by its document")

    # -- chunk snapshots -------------------------------------------------------------------------
    async def _sweep_snapshots(self, report: SweepReport, cutoff: datetime) -> None:
        tree = await asyncio.to_thread(scan_snapshots, self._snapshots.root)
        alive = await self._maintenance.existing_knowledge_bases(tree)
        for kb_id, kb in tree.items():
            if kb_id not in alive:
                if kb.newest <= cutoff:
                    await self._snapshots.delete_knowledge_base(kb_id)
                    report.snapshots.append(str(kb_id))
                continue
            ids = list(kb.documents)
            for start in range(0, len(ids), self._batch_size):
                chunk = ids[start:start + self._batch_size]
                existing = await self._maintenance.document_revisions(chunk)
                for document_id in chunk:
                    if document_id not in existing and kb.documents[document_id] <= cutoff:
                        await self._snapshots.delete_document(kb_id, document_id)
                        report.snapshots.append(f"{kb_id}/{document_id}")
                    elif document_id in existing:
                        report.temp_files += await asyncio.to_thread(
                            remove_stale_files, self._snapshots.temp_files(kb_id, document_id), cutoff)
                        report.snapshots += await self._sweep_revisions(kb_id, document_id, *existing[document_id],
                                                                        cutoff)

    async def _sweep_revisions(self, kb_id: UUID, document_id: UUID, published: int | None, latest: int,
                               cutoff: datetime) -> list[str]:
        """A published revision whose snapshot was not renamed (a crash right after its swap) gets
        it renamed; snapshots of other revisions than the published one and the one being built,
        older than the grace period, go (a failed or abandoned rebuild's)."""
        if published is not None and self._snapshots.revision_path(kb_id, document_id, published).exists():
            await self._snapshots.publish(kb_id, document_id, published)
        return await asyncio.to_thread(self._snapshots.prune, kb_id, document_id,
                                       lambda n: n not in (published, latest), cutoff.timestamp())

    # -- embedding cache -------------------------------------------------------------------------
    async def _evict_cache(self, report: SweepReport, _cutoff: datetime) -> None:
        if self._cache is not None:
            report.cache_entries = await self._cache.evict(self.cache_max_entries)

    # -- vectors ---------------------------------------------------------------------------------
    async def _sweep_vectors(self, report: SweepReport, _cutoff: datetime) -> None:
        """Vectors have no modification time; the job lock is what keeps live work safe."""
        table = self._vector_table
        if table is None or not await self._maintenance.has_table(table):
            return
        after = UUID(int=0)
        while ids := await self._maintenance.vector_documents_after(table, after, self._batch_size):
            report.vectors.update(await self._maintenance.remove_orphan_vectors(table, ids))
            after = ids[-1]


def remove_stale_files(paths: list[Path], cutoff: datetime) -> list[str]:
    """Unlink the files last modified before ``cutoff``: a write in progress is younger than the
    grace period, so only the leftovers of a killed writer go."""
    removed = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            if datetime.fromtimestamp(path.stat().st_mtime, UTC) <= cutoff:
                path.unlink()
                removed.append(str(path))
                log.info("janitor: removed %s (temp file of an interrupted write)", path)
    return removed


def keeps(owner: ObjectOwner, key: str) -> bool:
    """Whether ``key`` belongs to this document now: its current source, one of its assets, or
    anything at all while a job or an intake is working on it."""
    if owner.job_status == "RUNNING" or owner.status in _INTAKE:
        return True
    return key == owner.object_key or key in owner.asset_keys


def document_of(key: str) -> UUID | None:
    """Object keys are ``{kb_id}/{document_id}/...``; anything else is not ours to judge."""
    parts = key.split("/")
    if len(parts) < 3:
        return None
    try:
        UUID(parts[0])
        return UUID(parts[1])
    except ValueError:
        return None


@dataclass
class SnapshotDirs:
    newest: datetime  # the latest modification anywhere under the knowledge base's directory
    documents: dict[UUID, datetime]  # document directory -> its latest modification


def scan_snapshots(root: Path) -> dict[UUID, SnapshotDirs]:
    """``{root}/{kb_id}/{document_id}/`` with modification times; names that are not ids are left
    alone. Something that vanishes while we look counts as modified now (it is never removed)."""
    found: dict[UUID, SnapshotDirs] = {}
    for kb_dir in _subdirs(root):
        documents = {doc_id: _newest(doc_dir) for doc_dir in _subdirs(kb_dir)
                     if (doc_id := _uuid(doc_dir.name)) is not None}
        if (kb_id := _uuid(kb_dir.name)) is not None:
            found[kb_id] = SnapshotDirs(max([_newest(kb_dir, deep=False), *documents.values()]), documents)
    return found


def _subdirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir() and not p.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _newest(path: Path, deep: bool = True) -> datetime:
    try:
        times = [path.stat().st_mtime]
        if deep:
            times += [p.stat().st_mtime for p in path.rglob("*")]
    except FileNotFoundError:
        return datetime.now(UTC)
    return datetime.fromtimestamp(max(times), UTC)


def _uuid(name: str) -> UUID | None:
    try:
        return UUID(name)
    except ValueError:
        return None

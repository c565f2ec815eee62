"""The orphan sweeper against a real database, real files and real vectors: exactly the orphans go
(objects no row owns, old revisions, stale assets, snapshots of deleted documents and knowledge
bases, vectors of documents that are not READY), while current objects, young files and everything
of a document whose job is running stay; and only one sweeper runs at a time."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from uuid import UUID, uuid4

import psycopg

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually

from .helpers import new_kb, queue_document

OLD = time.time() - 2 * 3600  # older than the default grace of an hour


def age(path: Path, when: float = OLD) -> None:
    """Push a file, or a directory and everything under it, into the past."""
    for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(p, (when, when))


async def put_old(container, key: str, data: bytes = b"x") -> Path:
    await container.infra.storage.put(key, data, "application/octet-stream")
    path = container.settings.objects_dir / key
    age(path)
    return path


async def process(container) -> None:
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()


async def add_vectors(container, document_id: UUID, kb_id: UUID, n: int = 2) -> None:
    table = container.embedding.default_index.table
    for _ in range(n):
        await container.infra.db.execute(
            f"INSERT INTO {table} (chunk_id, document_id, knowledge_base_id, embedding)"
            f" VALUES (%s, %s, %s, array_fill(0.1::real, ARRAY[{container.embedding.default_index.dimension}])::vector)",
            (uuid4(), document_id, kb_id))


def object_files(container) -> set[str]:
    root = container.settings.objects_dir
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


async def test_sweep_removes_exactly_the_orphans(container) -> None:
    kb = await new_kb(container)
    ready = await queue_document(container, kb, "The ferry leaves the harbour at nine.")
    failed = await queue_document(container, kb, "A document whose processing failed for good.")
    busy = await queue_document(container, kb, "A document a worker is working on right now.")
    await process(container)
    snapshots = container.settings.snapshots_dir
    ready_doc = await container.ingest.documents.get(ready)
    age(container.settings.objects_dir / ready_doc.object_key)
    age(snapshots / str(kb) / str(ready))

    # a re-upload whose removal of the previous revision never ran: the row points at r2
    new_key = f"{kb}/{ready}/source.r2.txt"
    await put_old(container, new_key, b"The ferry leaves the harbour at ten.")
    await container.infra.db.execute("UPDATE documents SET object_key = %s, content_revision = 2 WHERE id = %s",
                               (new_key, ready))
    old_revision = ready_doc.object_key
    # an asset with a row (kept) and one left behind by an earlier run (removed)
    owned_asset = f"{kb}/{ready}/assets/{uuid4()}.png"
    stale_asset = f"{kb}/{ready}/assets/{uuid4()}.png"
    await put_old(container, owned_asset)
    await put_old(container, stale_asset)
    await container.infra.db.execute(
        "INSERT INTO document_assets (id, document_id, knowledge_base_id, object_key, mime_type, size_bytes,"
        " locator_key) VALUES (%s, %s, %s, %s, 'image/png', 1, 'p1')", (uuid4(), ready, kb, owned_asset))
    # stored, then the process died before the row was committed; and the temp file of a torn write
    never_committed = f"{kb}/{uuid4()}/source.txt"
    await put_old(container, never_committed)
    torn_write = f"{kb}/{ready}/.tmp-abc123"
    await put_old(container, torn_write)
    # young files are left alone, whoever owns them; so are keys that are not the product's layout
    young = f"{kb}/{uuid4()}/source.txt"
    await container.infra.storage.put(young, b"just uploaded", "text/plain")
    foreign = "README/notes.txt"
    await put_old(container, foreign)

    # the failed document (nothing published) keeps its source but its vectors go
    await container.infra.db.execute("UPDATE documents SET status = 'FAILED', published_revision = NULL WHERE id = %s",
                               (failed,))
    await container.infra.db.execute("UPDATE ingestion_jobs SET status = 'FAILED' WHERE document_id = %s", (failed,))
    assert await container.embedding.default_index.count_by_document(failed) > 0
    # vectors of a document that no longer exists
    gone = uuid4()
    await add_vectors(container, gone, kb)

    # a reindex a worker has claimed: not READY, but nothing of it may be touched
    await container.ingest.lifecycle.reindex(busy)
    [lease] = await container.infra.queue.claim("some-worker")
    assert lease.document_id == busy
    busy_extra = f"{kb}/{busy}/assets/{uuid4()}.png"
    await put_old(container, busy_extra)
    busy_vectors = await container.embedding.default_index.count_by_document(busy)
    assert busy_vectors > 0

    # snapshots of a hard-deleted document, of a deleted knowledge base, and a young orphan
    gone_doc_snapshot = snapshots / str(kb) / str(uuid4())
    gone_kb_snapshot = snapshots / str(uuid4())
    young_snapshot = snapshots / str(kb) / str(uuid4())
    for d in (gone_doc_snapshot, gone_kb_snapshot / str(uuid4()), young_snapshot):
        d.mkdir(parents=True)
        (d / "chunks.json").write_text("{}")
    age(gone_doc_snapshot)
    age(gone_kb_snapshot)

    before = object_files(container)
    report = await container.maintenance.janitor.sweep()

    assert report.ran and not report.errors
    assert sorted(report.objects) == sorted([old_revision, stale_asset, never_committed, torn_write])
    assert object_files(container) == before - set(report.objects)
    assert {new_key, owned_asset, young, foreign, busy_extra} <= object_files(container)
    assert sorted(report.snapshots) == sorted([f"{kb}/{gone_doc_snapshot.name}", gone_kb_snapshot.name])
    assert not gone_doc_snapshot.exists() and not gone_kb_snapshot.exists()
    assert young_snapshot.exists() and (snapshots / str(kb) / str(ready) / "chunks.json").exists()
    assert set(report.vectors) == {failed, gone} and report.vectors[gone] == 2
    assert await container.embedding.default_index.count_by_document(failed) == 0
    assert await container.embedding.default_index.count_by_document(busy) == busy_vectors
    assert await container.embedding.default_index.count_by_document(ready) > 0

    again = await container.maintenance.janitor.sweep()
    assert again.ran and not again.removed_anything


async def test_a_second_sweeper_does_nothing_while_the_lock_is_held(container, db_url) -> None:
    kb = await new_kb(container)
    orphan = f"{kb}/{uuid4()}/source.txt"
    path = await put_old(container, orphan)
    janitor = container.maintenance.janitor
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as other:
        await other.execute("SELECT pg_advisory_lock(hashtext('ultimate_rag.janitor'))")
        report = await janitor.sweep()
        assert not report.ran and report.objects == [] and path.exists()
        assert "holds the lock" in report.summary()
        # released explicitly: a closed connection's session lock goes only once its server
        # process has finished exiting, which the client does not wait for
        await other.execute("SELECT pg_advisory_unlock(hashtext('ultimate_rag.janitor'))")
    assert (await janitor.sweep()).objects == [orphan]
    assert not path.exists()


async def test_concurrent_sweeps_never_both_run(container) -> None:
    kb = await new_kb(container)
    for _ in range(30):
        await put_old(container, f"{kb}/{uuid4()}/source.txt")
    reports = await asyncio.gather(*(container.maintenance.janitor.sweep() for _ in range(4)))
    removed = [key for r in reports for key in r.objects]
    assert len(removed) == len(set(removed)) == 30
    assert sum(1 for r in reports if r.ran and r.objects) == 1


async def test_grace_period_protects_young_files(container) -> None:
    kb = await new_kb(container)
    key = f"{kb}/{uuid4()}/source.txt"
    await container.infra.storage.put(key, b"x", "text/plain")
    assert (await container.maintenance.janitor.sweep()).objects == []
    assert (await container.maintenance.janitor.with_grace(0).sweep()).objects == [key]


async def test_workers_sweep_periodically(container) -> None:
    kb = await new_kb(container)
    path = await put_old(container, f"{kb}/{uuid4()}/source.txt")
    worker = container.worker(WorkerConfig(poll_interval_seconds=0.1, janitor_interval_seconds=0.2))
    assert worker.janitor is container.maintenance.janitor  # built with the container
    stop = asyncio.Event()
    run = asyncio.create_task(worker.run(stop))

    def removed() -> float | None:
        return worker.metrics.registry.get_sample_value("ultimate_rag_janitor_removed_total", {"kind": "objects"})

    # the file goes mid-sweep and the counter moves when the sweep ends: wait for the counter
    try:
        await eventually(removed)
    finally:
        stop.set()
        await run
    assert not path.exists()
    assert removed() == 1


async def test_temp_files_of_interrupted_snapshot_writes_are_removed_after_the_grace_period(container) -> None:
    """A worker killed between writing a snapshot's temp file and renaming it leaves the temp file
    in a live document's folder: removed once older than the grace period, the snapshot kept."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "The ferry leaves the harbour at nine.")
    await process(container)
    folder = container.settings.snapshots_dir / str(kb) / str(doc)
    stale, fresh = folder / ".chunks-killed1.tmp", folder / ".chunks-writing.tmp"
    stale.write_text('{"half": ')
    fresh.write_text('{"in progress": ')
    age(stale)
    report = await container.maintenance.janitor.sweep()
    assert report.temp_files == [str(stale)] and not report.snapshots
    assert not stale.exists() and fresh.exists() and (folder / "chunks.json").exists()
    assert "1 temp file(s)" in report.summary()

    report = await container.maintenance.janitor.with_grace(0).sweep()
    assert report.temp_files == [str(fresh)] and (folder / "chunks.json").exists()


async def test_vectors_left_by_an_earlier_attempt_go_with_a_retry_or_to_the_sweep(container) -> None:
    """A document's first publication by its job's first attempt sends no removal of other vectors
    (search served nothing of it); what an earlier, killed job left is not served and is the
    sweep's. A job's later attempt removes what its earlier attempts left at its READY commit."""
    kb = await new_kb(container)
    first = await queue_document(container, kb, "The ferry leaves the harbour at nine every morning.")
    await add_vectors(container, first, kb, n=2)  # a killed earlier job's, under other chunk ids
    await process(container)
    chunks = (await container.ingest.documents.get(first)).chunk_count
    assert chunks > 0 and await container.embedding.default_index.count_by_document(first) == chunks + 2
    hits = await container.retrieval.search.search(kb, "ferry harbour", 10)
    assert {str(h.chunk_id) for h in hits} <= {str(c.id) for c in await container.ingest.documents.chunks(first)}
    report = await container.maintenance.janitor.with_grace(0).sweep()
    assert report.vectors == {first: 2} and await container.embedding.default_index.count_by_document(first) == chunks

    retried = await queue_document(container, kb, "The night ferry waits for the last train from the city.")
    [lost] = await container.infra.queue.claim("a-worker-that-dies")
    assert lost.document_id == retried and lost.attempt == 1
    await add_vectors(container, retried, kb, n=3)  # what the lost attempt wrote
    await container.infra.db.execute("UPDATE ingestion_jobs SET locked_at = now() - interval '1 hour' WHERE id = %s",
                               (lost.job_id,))
    assert await container.infra.queue.claim("converger") == []  # converged: given back, due after a backoff
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE id = %s", (lost.job_id,))
    await process(container)
    doc = await container.ingest.documents.get(retried)
    assert doc.status.value == "READY" and (await job_row_attempts(container, retried)) == 2
    assert await container.embedding.default_index.count_by_document(retried) == doc.chunk_count


async def job_row_attempts(container, document_id: UUID) -> int:
    row = await container.infra.db.fetchone("SELECT attempts FROM ingestion_jobs WHERE document_id = %s", (document_id,))
    return int(row["attempts"])

"""The READY commit and the database work of a document (SPEC §4 rule 2, §5): the language
centroids and the asset rows commit with READY or not at all; the new revision's vectors are
written beside the published ones before it (a search straddling the swap finds one revision or
the other) and a failed attempt removes them; a document costs a bounded number of statements
(the pipeline's throughput is its per-document database work; bench/RESULTS.md)."""

from __future__ import annotations

import asyncio
import collections
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import psycopg
import pytest

from ultimate_rag.adapters.postgres.centroids import LanguageCentroids
from ultimate_rag.adapters.postgres.pipeline import replace_asset_rows
from ultimate_rag.domain.models import Chunk, DocumentAsset, EmbeddedChunk, SourceLocator
from ultimate_rag.services.job_loop import WorkerConfig

from .helpers import new_kb, queue_document

TEXT = ("The ferry leaves the harbour at nine in the morning and returns at six in the evening. "
        "Tickets are sold at the pier; bicycles travel free of charge on weekdays. ") * 6


async def run_worker(container) -> int:
    return int(await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle())


async def counts(container, document_id: UUID) -> tuple[int, int]:
    """(vectors of the document in the store, its language centroid chunk count)."""
    row = await container.infra.db.fetchone("SELECT coalesce(sum(n), 0) AS n FROM language_centroids")
    return await container.embedding.default_index.count_by_document(document_id), int(row["n"]) if row else 0


class StatementCounter:
    """Every statement psycopg sends on an async cursor (a many-row insert counts once per row),
    and every transaction opened on an async connection."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: collections.Counter[str] = collections.Counter()
        self.transactions = 0
        execute, executemany = psycopg.AsyncCursor.execute, psycopg.AsyncCursor.executemany
        transaction = psycopg.AsyncConnection.transaction

        async def counted_execute(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            self.statements[_first_line(query)] += 1
            return await execute(cur, query, params, **kw)

        async def counted_many(cur: Any, query: Any, rows: Any, **kw: Any) -> Any:
            rows = list(rows)
            self.statements[_first_line(query)] += len(rows)
            return await executemany(cur, query, rows, **kw)

        def counted_transaction(conn: Any, *args: Any, **kw: Any) -> Any:
            self.transactions += 1
            return transaction(conn, *args, **kw)

        monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted_execute)
        monkeypatch.setattr(psycopg.AsyncCursor, "executemany", counted_many)
        monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted_transaction)

    def snapshot(self) -> collections.Counter[str]:
        return collections.Counter(self.statements)


def _first_line(query: Any) -> str:
    text = query if isinstance(query, str) else repr(query)
    return " ".join(text.split())[:100]


async def _statements_for(container, monkeypatch: pytest.MonkeyPatch, kb: UUID, text: str) -> tuple[int, int, int]:
    """(statements, transactions, chunks) of one document from its claim to READY, without the
    writes that depend on time (progress during a stage, the lease's heartbeat)."""
    doc = await queue_document(container, kb, text)
    with monkeypatch.context() as patched:
        patched.setattr(container.ingest.processor, "_progress_interval", 3600.0)  # no progress write mid-stage

        counter = StatementCounter(patched)
        worker = container.worker(WorkerConfig(heartbeat_seconds=3600))  # no heartbeat
        assert await worker.run_until_idle() == 1
    counted = counter.snapshot()
    chunks = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks WHERE document_id = %s", (doc,))
    status = await container.infra.db.fetchone("SELECT status FROM documents WHERE id = %s", (doc,))
    assert status["status"] == "READY"
    del counted[""]  # the pool's full check of a connection that was not quiet (a pool matter, not the pipeline's)
    return sum(counted.values()) - 1, counter.transactions, int(chunks["n"])  # the last claim found nothing


async def test_a_document_costs_a_bounded_number_of_statements_whatever_its_chunks(container, monkeypatch) -> None:
    """Measured when written, for one plain-text document (dedup exact, sparse vectors on), from
    its claim to READY: 14 statements in 2 transactions, however many chunks it has (a many-row
    write is one statement: the chunk rows, the dense and sparse vectors, the cache entries, the
    language centroids' shares, which the database adds to; the
    document and its index plan come with the claim and the plan is checked again with the READY
    commit's writes; the EMBEDDING entry is the stage's first progress, written with a unique
    document's deduplication verdict; a first publication has no previous vectors to remove). 16
    at b5ce47e (the centroids read and written back, EMBEDDING entered on its own), 19 at dd0210e;
    before (commit 176e304, counted the same
    way): 36 statements in 6 transactions for 2 chunks, 71 for 9.
    A guard on the database work per document (the pipeline's ceiling is that work,
    bench/RESULTS.md), not a timing."""
    kb = await new_kb(container)
    await queue_document(container, kb, "warm up: the model and the vector table are ready " * 5)
    await run_worker(container)
    few = await _statements_for(container, monkeypatch, kb, TEXT)
    many = await _statements_for(container, monkeypatch, kb, TEXT.replace("ferry", "boat") * 8)
    assert few[2] >= 2 and many[2] >= 4 * few[2], (few, many)
    assert many[:2] == few[:2], (few, many)  # not one statement more for four times the chunks
    statements, transactions, _ = few
    assert statements <= 14, statements
    assert transactions <= 2, transactions


async def test_a_failed_ready_commit_leaves_no_vector_and_no_centroid_share(client, container, monkeypatch) -> None:
    """The READY commit fails at its last step: the centroid shares it added are rolled back with
    it, the attempt's vectors are removed by its failure, and the previous revision serves on; the
    retry then swaps completely."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, TEXT)
    await run_worker(container)
    before = await counts(container, doc)
    assert before[0] > 0 and before[1] > 0
    published = {r["id"] for r in await container.infra.db.fetchall("SELECT id FROM chunks WHERE document_id = %s", (doc,))}

    r = await client.put(f"/api/documents/{doc}/content",
                         files={"file": ("doc.txt", ("A different text about quokkas on an island. " * 30).encode(),
                                         "text/plain")})
    assert r.status_code == 202, r.text
    publish, failures = container.infra.snapshots.publish, []

    async def failing_publish(*args: Any) -> None:
        failures.append(args)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(container.infra.snapshots, "publish", failing_publish)
    worker = container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=30))
    assert await worker.run_until_idle(max_jobs=1) == 1
    assert failures  # the commit reached its last step, then failed
    row = await container.infra.db.fetchone("SELECT status, published_revision FROM documents WHERE id = %s", (doc,))
    assert (row["status"], row["published_revision"]) == ("PENDING", 1)
    assert await counts(container, doc) == before  # no new vector, no old one gone, no centroid share
    chunk_ids = {r["id"] for r in await container.infra.db.fetchall("SELECT id FROM chunks WHERE document_id = %s", (doc,))}
    assert chunk_ids == published

    monkeypatch.setattr(container.infra.snapshots, "publish", publish)
    await container.infra.db.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (doc,))
    assert await run_worker(container) == 1
    row = await container.infra.db.fetchone("SELECT status, published_revision, chunk_count FROM documents WHERE id = %s",
                                      (doc,))
    assert (row["status"], row["published_revision"]) == ("READY", 2)
    vectors, centroid_chunks = await counts(container, doc)
    assert vectors == row["chunk_count"]  # the new revision's only: the old ones went in the same commit
    assert centroid_chunks == row["chunk_count"]  # the previous revision's share left the sums at the swap


async def test_a_revision_without_assets_removes_an_interrupted_runs_asset_rows(container) -> None:
    """A run that stored asset rows and was then interrupted leaves them under the revision; a
    later run of the same revision that has no assets writes none, and its READY commit removes
    those rows, and then their objects."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, TEXT)
    ident = uuid4()
    key = f"{kb}/{doc}/assets/{ident}.png"
    await container.infra.storage.put(key, b"\x89PNG leftover", "image/png")
    async with container.infra.db.transaction() as conn:
        await replace_asset_rows(conn, doc, [DocumentAsset(
            id=ident, document_id=doc, knowledge_base_id=kb, object_key=key, mime_type="image/png",
            size_bytes=13, page=None, description="", locator_key="figure-1")], 1)
    assert await run_worker(container) == 1
    assert await container.ingest.documents.assets(doc) == []
    with pytest.raises(Exception):  # noqa: B017 - the object is gone, whatever the storage calls it
        await container.infra.storage.get(key)


async def test_centroid_shares_added_at_once_are_all_counted(container) -> None:
    """Concurrent adds to a language row that does not exist yet: one makes it, every add locks
    it in turn (one statement makes and locks), none is lost."""
    kb = await new_kb(container)
    centroids = LanguageCentroids(container.infra.db)
    doc = uuid4()
    documents = [await published_document(container, kb) for _ in range(6)]

    def item(n: int) -> EmbeddedChunk:
        vector = np.zeros(4, dtype=np.float32)
        vector[n % 4] = 1.0
        chunk = Chunk(id=uuid4(), document_id=doc, knowledge_base_id=kb, ordinal=n, content=f"english text {n}",
                      token_count=3, heading_path=(), locator=SourceLocator())
        return EmbeddedChunk(chunk=chunk, embedding=tuple(float(x) for x in vector), sparse={n: 1.0})

    batches = [[item(8 * b + i) for i in range(8)] for b in range(6)]
    await asyncio.gather(*(centroids.add(kb, "m", batch, document=(d, 1))
                           for d, batch in zip(documents, batches, strict=True)))
    means = await centroids.means(kb, "m")
    assert list(means) == ["latin"]
    [(dense, sparse, _)] = means.values()
    row = await container.infra.db.fetchone("SELECT n FROM language_centroids WHERE knowledge_base_id = %s", (kb,))
    assert row["n"] == 48
    assert np.allclose(dense, [0.25, 0.25, 0.25, 0.25])
    assert np.isclose(sparse.sum(), 1.0) and np.count_nonzero(sparse) == 48


async def test_a_generation_switch_during_the_run_rolls_the_ready_commit_back(container, monkeypatch) -> None:
    """The knowledge base moved to another index generation while the document was indexed (a
    migration that began and ended meanwhile): the READY commit reads the knowledge base's index
    state in its own statement and rolls back, publishing nothing (no chunk row, no snapshot, no
    centroid share), and the job runs again."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, TEXT)
    write = container.embedding.indexes.write

    async def write_then_switch(kb_id: UUID, items: Any, share: Any = None) -> None:
        await write(kb_id, items, share)
        await container.infra.db.execute("UPDATE knowledge_bases SET settings = settings || '{\"index_generation\": 9}'"
                                   " WHERE id = %s", (kb_id,))

    monkeypatch.setattr(container.embedding.indexes, "write", write_then_switch)
    worker = container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=30))
    assert await worker.run_until_idle(max_jobs=1) == 1
    row = await container.infra.db.fetchone(
        "SELECT d.status, d.published_revision, d.error_message, j.status AS job FROM documents d "
        "JOIN ingestion_jobs j ON j.document_id = d.id WHERE d.id = %s", (doc,))
    assert (row["status"], row["published_revision"], row["job"]) == ("PENDING", None, "PENDING"), row
    assert "switched to another embedding model" in row["error_message"]
    assert (await counts(container, doc))[1] == 0  # no centroid share (the vectors it wrote in the generation
    # it planned are that generation's to drop: a real migration's end drops it)
    chunks = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks WHERE document_id = %s", (doc,))
    assert chunks["n"] == 0
    assert not container.infra.snapshots.path(kb, doc).exists()


async def published_document(container, kb: UUID) -> UUID:
    """A document whose revision 1 is published (centroid shares are added only for the published one)."""
    doc = await queue_document(container, kb, "x")
    await container.infra.db.execute("UPDATE documents SET published_revision = 1 WHERE id = %s", (doc,))
    return doc


def _item(kb: UUID, doc: UUID, n: int, content: str, width: int = 4) -> EmbeddedChunk:
    vector = np.zeros(width, dtype=np.float32)
    vector[n % width] = 1.0
    chunk = Chunk(id=uuid4(), document_id=doc, knowledge_base_id=kb, ordinal=n, content=content,
                  token_count=3, heading_path=(), locator=SourceLocator())
    return EmbeddedChunk(chunk=chunk, embedding=tuple(float(x) for x in vector), sparse={n: 1.0})


async def test_centroid_sums_from_before_the_database_added_them_still_count(container) -> None:
    """Migration 0019: sums written before it (float32 bytes) stay in the mean; shares added since
    go to the vectors the database adds to; one statement adds a document's languages at once."""
    kb = await new_kb(container)
    legacy_dense = np.array([4.0, 0.0, 0.0, 0.0], dtype=np.float32)  # 4 chunks, all on the first axis
    legacy_sparse = np.zeros(16384, dtype=np.float32)
    legacy_sparse[16000] = 4.0
    await container.infra.db.execute(
        "INSERT INTO language_centroids (knowledge_base_id, model, language, n, dense, sparse) "
        "VALUES (%s, 'm', 'latin', 4, %s, %s)", (kb, legacy_dense.tobytes(), legacy_sparse.tobytes()))
    centroids = LanguageCentroids(container.infra.db, ttl=0)
    doc = await published_document(container, kb)
    await centroids.add(kb, "m", [_item(kb, doc, 1, "english text"), _item(kb, doc, 2, "english words"),
                                  _item(kb, doc, 3, "中文文本"), _item(kb, doc, 9000, "更多中文")], document=(doc, 1))
    means = await centroids.means(kb, "m")
    assert sorted(means) == ["latin", "zh"]
    dense, sparse, _ = means["latin"]
    assert np.allclose(dense, [4 / 6, 1 / 6, 1 / 6, 0.0])
    assert np.isclose(sparse[16000], 4 / 6) and np.isclose(sparse[1], 1 / 6) and np.isclose(sparse.sum(), 1.0)
    dense, sparse, _ = means["zh"]
    assert np.allclose(dense, [0.5, 0.0, 0.0, 0.5]) and np.isclose(sparse[9000], 0.5) and np.isclose(sparse[3], 0.5)
    from ultimate_rag.adapters.postgres.database import Database

    unregistered = Database(container.infra.db.url, min_size=1, max_size=1, register_vector=False)
    await unregistered.open()  # a connection opened before the vector type existed reads them as text
    try:
        again = await LanguageCentroids(unregistered, ttl=0).means(kb, "m")
    finally:
        await unregistered.close()
    assert all(np.allclose(again[k][0], means[k][0]) and np.allclose(again[k][1], means[k][1]) for k in means)


async def test_a_centroid_of_another_width_starts_over_and_shares_without_sparse_leave_its_sum(container) -> None:
    """The same model name serving vectors of another width: that language's sums start over from
    the new share (vectors of two widths do not add); a share without sparse vectors adds to the
    dense sum and count only."""
    kb = await new_kb(container)
    centroids = LanguageCentroids(container.infra.db, ttl=0)
    doc, other, third = [await published_document(container, kb) for _ in range(3)]
    await centroids.add(kb, "m", [_item(kb, doc, 0, "english text")], document=(doc, 1))
    await centroids.add(kb, "m", [_item(kb, other, 1, "english text", width=6)], document=(other, 1))
    [(dense, sparse, _)] = (await centroids.means(kb, "m")).values()
    assert np.allclose(dense, [0, 1, 0, 0, 0, 0]) and np.isclose(sparse[1], 1.0) and np.isclose(sparse.sum(), 1.0)
    plain = EmbeddedChunk(chunk=_item(kb, doc, 2, "english text").chunk, embedding=(0, 0, 1.0, 0, 0, 0))
    await centroids.add(kb, "m", [plain], document=(third, 1))
    [(dense, sparse, _)] = (await centroids.means(kb, "m")).values()
    assert np.allclose(dense, [0, 0.5, 0.5, 0, 0, 0]) and np.isclose(sparse.sum(), 0.5)

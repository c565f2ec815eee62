"""A bulk reindex is a rolling rebuild (SPEC §4 rule 3, §6), with real worker processes, one of
them SIGKILLed half-way: a search loop running throughout never sees a READY document disappear,
never sees a half-built revision, and sees the new content right after each swap; afterwards every
document serves exactly one complete revision, nothing is stuck and, after the janitor, no vector
is left that search could not serve."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Any
from uuid import UUID

import pytest

from ultimate_rag.domain.search import SearchFilters, SearchMode
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.lifecycle import BulkReindexFilter
from ultimate_rag.testing.eventually import eventually

from ..integration.helpers import new_kb, queue_document

pytestmark = pytest.mark.acceptance

TOPICS = ["volcano", "lighthouse", "orchard", "glacier", "bakery", "observatory"]
MODES = [SearchMode.HYBRID, SearchMode.DENSE, SearchMode.SPARSE]


def text_of(topic: str, marker: str = "") -> str:
    """About six chunks; ``marker`` is what the "upgraded parser" now extracts at the end (and its
    title changes, so every chunk is embedded again: the rebuild takes a while)."""
    body = "\n\n".join(f"Part {i} of the {topic} report. The {topic} team counted {i * 13} visitors on day {i}, "
                       f"noted the weather, and listed what the {topic} needs before next season." * 3
                       for i in range(12))
    title = f"The {topic} report" + (", revised edition" if marker else "")
    return f"# {title}\n\n{body}" + (f"\n\n{marker}\n" if marker else "")


async def published(container, doc: UUID) -> int | None:
    row = await container.infra.db.fetchone("SELECT published_revision FROM documents WHERE id = %s", (doc,))
    return row["published_revision"] if row else None


async def test_search_stays_whole_through_a_bulk_reindex_with_a_worker_killed(container, settings,
                                                                              workers) -> None:
    kb = await new_kb(container)
    docs = {topic: await queue_document(container, kb, text_of(topic), filename=f"{topic}.md") for topic in TOPICS}
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    old_ids = {}
    for doc in docs.values():
        assert await published(container, doc) == 1
        old_ids[doc] = {c.id for c in await container.ingest.documents.chunks(doc)}

    # a parser upgrade, as far as the index can tell: the same documents now yield a new last line
    for topic, doc in docs.items():
        row = await container.infra.db.fetchone("SELECT object_key FROM documents WHERE id = %s", (doc,))
        await container.infra.storage.put(row["object_key"], text_of(topic, f"Revised edition marker ZEBRA-{topic}.").encode(),
                                    "text/plain")

    problems: list[str] = []
    seen_new: set[UUID] = set()
    searches = 0
    stop = asyncio.Event()

    async def search_loop() -> None:
        nonlocal searches
        while not stop.is_set():
            for topic, doc in docs.items():
                mode = MODES[searches % len(MODES)]
                before = await published(container, doc)
                hits = await container.retrieval.search.search(
                    kb, f"{topic} report marker ZEBRA", 10, mode=mode, filters=SearchFilters(document_ids=(doc,)))
                after = await published(container, doc)
                searches += 1
                ids = {h.chunk_id for h in hits}
                new = [h for h in hits if "ZEBRA" in h.content]
                if not hits:
                    problems.append(f"{topic}: not found ({mode}, revision {before}..{after})")
                elif ids & old_ids[doc] and ids - old_ids[doc]:
                    problems.append(f"{topic}: old and new chunks in one answer ({mode})")
                elif before == after == 1 and (new or ids - old_ids[doc]):
                    problems.append(f"{topic}: the revision being built was served before its swap ({mode})")
                elif before == after == 2 and ids & old_ids[doc]:
                    problems.append(f"{topic}: the previous revision was served after the swap ({mode})")
                if before == after == 2 and not new and mode is not SearchMode.SPARSE:
                    problems.append(f"{topic}: the new content was not found right after the swap ({mode})")
                if after == 2:
                    seen_new.add(doc)

    loop = asyncio.create_task(search_loop())
    try:
        await eventually(lambda: asyncio.sleep(0, result=searches >= len(docs)), timeout=60)
        queued, skipped = await container.ingest.lifecycle.bulk_reindex(kb, BulkReindexFilter.ALL)
        assert (queued, skipped) == (len(docs), 0)
        first = workers.start()
        workers.start()

        async def first_is_busy() -> bool:
            row = await container.infra.db.fetchone(
                "SELECT count(*) AS n FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id"
                " WHERE j.status = 'RUNNING' AND j.locked_by LIKE %s AND d.status IN ('CHUNKING', 'EMBEDDING', 'INDEXING')",
                (f"%:{first.pid}:%",))
            return bool(row["n"])

        await eventually(first_is_busy, timeout=120)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        workers.start()

        async def all_rebuilt() -> bool:
            progress: dict[str, Any] | None = await container.ingest.lifecycle.rebuild_progress(kb)
            assert progress is not None and progress["failed"] == 0, progress
            return progress["rebuilt"] == len(docs)

        await eventually(all_rebuilt, timeout=300)
        await eventually(lambda: asyncio.sleep(0, result=len(seen_new) == len(docs)), timeout=60)
    finally:
        stop.set()
        await loop
    assert not problems, problems[:20]
    assert searches > 3 * len(docs)

    await container.maintenance.janitor.with_grace(0).sweep()
    for doc in docs.values():
        row = await container.infra.db.fetchone(
            "SELECT d.status, d.published_revision, d.content_revision, d.chunk_count, j.status AS job"
            " FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id WHERE d.id = %s", (doc,))
        assert (row["status"], row["job"], row["published_revision"], row["content_revision"]) == (
            "READY", "SUCCEEDED", 2, 2), row
        chunks = await container.infra.db.fetchall("SELECT id, revision FROM chunks WHERE document_id = %s", (doc,))
        assert {c["revision"] for c in chunks} == {2} and len(chunks) == row["chunk_count"]
        chunk_ids = {c["id"] for c in chunks}
        assert not chunk_ids & old_ids[doc]
        vectors = await container.infra.db.fetchall(
            f"SELECT chunk_id FROM {container.embedding.default_index.table} WHERE document_id = %s", (doc,))
        assert {v["chunk_id"] for v in vectors} == chunk_ids and len(vectors) == len(chunk_ids)
        sparse = await container.infra.db.fetchall("SELECT chunk_id FROM chunk_sparse_vectors WHERE document_id = %s",
                                             (doc,))
        assert {v["chunk_id"] for v in sparse} <= chunk_ids
        folder = settings.snapshots_dir / str(kb) / str(doc)
        snapshot = json.loads((folder / "chunks.json").read_text())
        assert {UUID(c["id"]) for c in snapshot["chunks"]} == chunk_ids
        assert not list(folder.glob("chunks.r*.json"))
    stuck = await container.infra.db.fetchone(
        "SELECT count(*) AS n FROM ingestion_jobs WHERE status IN ('PENDING', 'RUNNING')")
    assert stuck["n"] == 0

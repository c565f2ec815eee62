"""``ultimate-rag janitor`` as an operator runs it, against the test database and data dir: one
pass, a line per removal and a summary, exit 0; nothing done while another pass holds the lock."""

from __future__ import annotations

import os
import time
from uuid import uuid4

import psycopg
import pytest

from ultimate_rag.testing.eventually import eventually

from .test_cli import cli

pytestmark = pytest.mark.acceptance


def old_file(path, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    then = time.time() - 2 * 3600
    os.utime(path, (then, then))


async def test_janitor_command_removes_orphans_and_reports_them(settings, container) -> None:
    from tests.integration.helpers import new_kb, queue_document

    kb = await new_kb(container)
    doc = await queue_document(container, kb, "kept: a document row owns it")
    owned = settings.objects_dir / (await container.ingest.documents.get(doc)).object_key
    os.utime(owned, (time.time() - 7200, time.time() - 7200))
    orphan_key = f"{kb}/{uuid4()}/source.txt"
    old_file(settings.objects_dir / orphan_key)
    orphan_snapshot = settings.snapshots_dir / str(uuid4()) / str(uuid4()) / "chunks.json"
    old_file(orphan_snapshot, b"{}")
    for folder in (orphan_snapshot.parent, orphan_snapshot.parent.parent):  # a deleted knowledge base's
        os.utime(folder, (time.time() - 7200, time.time() - 7200))

    done = cli(settings, "janitor")
    assert done.returncode == 0, done.stderr
    assert f"removed object {orphan_key}" in done.stdout
    assert "removed 1 orphaned object(s), 1 chunk snapshot directory(ies), 0 vector(s)" in done.stdout
    assert owned.exists() and not (settings.objects_dir / orphan_key).exists()
    assert not orphan_snapshot.parent.parent.exists()

    young_key = f"{kb}/{uuid4()}/source.txt"
    (settings.objects_dir / young_key).parent.mkdir(parents=True)
    (settings.objects_dir / young_key).write_bytes(b"y")
    assert "removed 0 orphaned object(s)" in cli(settings, "janitor").stdout
    assert f"removed object {young_key}" in cli(settings, "janitor", "--grace-seconds", "0").stdout
    assert cli(settings, "janitor", "--grace-seconds", "-1").returncode == 2


async def test_janitor_command_does_nothing_while_another_pass_runs(settings) -> None:
    orphan = settings.objects_dir / str(uuid4()) / str(uuid4()) / "source.txt"
    old_file(orphan)
    async with await psycopg.AsyncConnection.connect(settings.database_url, autocommit=True) as other:
        await other.execute("SELECT pg_advisory_lock(hashtext('ultimate_rag.janitor'))")
        busy = cli(settings, "janitor")
    assert busy.returncode == 0 and "holds the lock" in busy.stdout
    assert orphan.exists()


async def test_a_worker_process_sweeps_serves_its_metrics_and_logs_json(settings, container, workers) -> None:
    """The same sweeper, run periodically by ``ultimate-rag worker``, next to its own /metrics and
    JSON log lines that name the document they are about."""
    import json
    import socket

    import httpx

    from tests.integration.helpers import new_kb, queue_document

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    orphan = settings.objects_dir / str(uuid4()) / str(uuid4()) / "source.txt"
    old_file(orphan)
    proc = workers.start(ULTIMATE_RAG_JANITOR_INTERVAL_SECONDS="0.5", ULTIMATE_RAG_WORKER_METRICS_PORT=str(port),
                         ULTIMATE_RAG_LOG_FORMAT="json")
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "A worker process indexes this and says so in JSON.")

    async def ready() -> bool:
        return (await container.ingest.documents.get(doc)).status == "READY"

    await eventually(ready)
    await eventually(lambda: not orphan.exists())
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    assert 'ultimate_rag_worker_jobs_succeeded_total{operation="ingest"} 1.0' in text
    assert 'ultimate_rag_janitor_removed_total{kind="objects"} 1.0' in text
    assert 'ultimate_rag_worker_stage_duration_seconds_count{stage="EMBEDDING"} 1.0' in text
    lines = [json.loads(line) for line in workers.log_of(proc).splitlines() if line.startswith("{")]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line.get("worker_id") for line in lines)
    assert any("janitor" in line["message"] and str(orphan.parent.name) in line["message"] for line in lines)

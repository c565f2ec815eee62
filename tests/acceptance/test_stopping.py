"""Stopping `up` the ways people and service managers do: a signal to its whole process group (Ctrl-C
in a terminal, systemd's ``KillMode=control-group``, a container init) reaches every worker directly
and `up` forwards another; that is one graceful stop, whatever the signal. A later second signal
to a worker hands its jobs back at once. And `up` killed with SIGKILL leaves no database behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx
import psutil
import pytest

from ultimate_rag.testing.eventually import eventually, eventually_sync

from ..integration.helpers import new_kb, queue_document
from .test_restart import kill_group
from .test_up import free_port, wait_until
from .test_worker_crashes import LONG_TEXT, doc_state, sections

pytestmark = pytest.mark.acceptance
KEY = "stopping-test-key"
STOP_FAILURES = ("could not hand back", "Traceback", "stopping now", "lease lost", "crashed on this file")


def _ready(base: str) -> bool:
    return httpx.get(f"{base}/readyz").status_code == 200


def start_up(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"PYTHONUNBUFFERED": "1", "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.5", "ULTIMATE_RAG_EMBED_BATCH_SIZE": "2",
            "ULTIMATE_RAG_ADMIN_KEY": KEY, "ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS": "1"}
    return subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--port", str(port), "--workers", "2",
                             "--data-dir", str(data_dir)], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own process group, as a terminal or a service gives it


def test_a_signal_to_up_s_process_group_is_one_graceful_stop(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    h = {"Authorization": f"Bearer {KEY}"}
    docs: list[str] = []
    for run, sig in enumerate((signal.SIGINT, signal.SIGTERM)):
        before = log.stat().st_size if log.exists() else 0
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = start_up(data_dir, port, log)
        try:
            wait_until(partial(_ready, base), timeout=90)
            if not docs:
                kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "stop"}, headers=h).json()["id"]
                for i in range(4):  # ~6 chunks each: in flight long enough to be stopped in the middle
                    r = httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=h,
                                   files={"file": (f"d{i}.txt", f"Document {i}.\n\n{sections(35)}".encode())})
                    docs.append(r.json()["id"])

            def in_flight(base: str = base) -> bool:
                items = [httpx.get(f"{base}/api/documents/{d}", headers=h).json() for d in docs]
                return any(i["status"] in ("PARSING", "CHUNKING", "EMBEDDING", "INDEXING") for i in items)

            wait_until(in_flight, timeout=180)
            os.killpg(proc.pid, sig)  # Ctrl-C, or a service manager stopping the whole group
            code = proc.wait(timeout=90)
        except BaseException:
            kill_group(proc)
            raise
        text = log.read_bytes()[before:].decode(errors="replace")
        assert code == 0, text[-3000:]
        assert "handed back" in text, f"run {run}: nothing was in flight"
        for failure in STOP_FAILURES:
            assert failure not in text, text[-4000:]

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_up(data_dir, port, log)
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)

        def all_ready() -> list[dict]:
            items = [httpx.get(f"{base}/api/documents/{d}", headers=h).json() for d in docs]
            assert not [i for i in items if i["status"] == "FAILED"], items
            return items if all(i["status"] == "READY" for i in items) else []

        final = wait_until(all_ready, timeout=600)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=90)
    # every handed-back attempt was given back: one attempt each, none lost, none added
    assert [(d["attempts"], d["max_attempts"]) for d in final] == [(1, 3)] * len(docs)
    assert not [d for d in final if d.get("error_history")]


async def test_a_later_second_signal_hands_the_jobs_back_at_once(container, settings, workers) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, LONG_TEXT * 4)
    worker = workers.start(ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS="600")

    async def embedding() -> bool:
        row = await doc_state(container, doc)
        return row["status"] == "EMBEDDING" and (row["progress"] or {}).get("done", 0) >= 2

    await eventually(embedding, timeout=300)
    worker.send_signal(signal.SIGTERM)
    worker.send_signal(signal.SIGINT)  # the same stop (a group's signal and a forwarded one)
    await eventually(lambda: "already stopping" in workers.log_of(worker))
    assert worker.poll() is None  # finishing its job within the grace period
    await asyncio.sleep(2.5)  # scenario: the operator's second signal comes later than the same-stop window
    worker.send_signal(signal.SIGTERM)
    assert eventually_sync(lambda: worker.poll() is not None, timeout=60)
    assert worker.returncode == 0
    row = await doc_state(container, doc)
    assert (row["job_status"], row["attempts"], row["locked_by"]) == ("PENDING", 0, None), row
    text = workers.log_of(worker)
    assert "handing in-flight jobs back now" in text and "handed back" in text
    assert "could not hand back" not in text and "Traceback" not in text, text[-3000:]


def test_the_database_stops_when_up_is_killed(tmp_path: Path) -> None:
    """SIGKILL gives `up` no chance to stop anything: its workers notice and stop by themselves
    (handing their jobs back, which needs the database), then the database's watchdog stops it."""
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    port = free_port()
    proc = start_up(data_dir, port, log)
    try:
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200, timeout=90)
        workers = [p for p in psutil.Process(proc.pid).children() if "ultimate_rag.worker" in " ".join(p.cmdline())]
        assert len(workers) == 2
        postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
    finally:
        proc.kill()
        proc.wait(timeout=30)
    _, alive = psutil.wait_procs(workers, timeout=60)
    assert not alive, log.read_text()[-2000:]
    wait_until(lambda: not (data_dir / "pg" / "postmaster.pid").exists(), timeout=60)
    assert not psutil.pid_exists(postmaster) or psutil.Process(postmaster).status() == psutil.STATUS_ZOMBIE
    # pg_ctl returns once the pid file is gone, and the watchdog says so just after: wait for the line
    wait_until(lambda: "stopped the server" in log.read_text(), timeout=30)

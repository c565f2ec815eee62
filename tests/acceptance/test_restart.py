"""Restart after a hard crash: the API, every worker (and the embedded database with them, they
share a process group) are SIGKILLed mid-ingest of a batch; started again, every document reaches a
stable status with no manual step, through lease expiry alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from .test_up import free_port, wait_until

pytestmark = pytest.mark.acceptance


def start_up(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"PYTHONUNBUFFERED": "1", "ULTIMATE_RAG_LEASE_SECONDS": "4", "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.5",
            "ULTIMATE_RAG_EMBED_BATCH_SIZE": "2", "ULTIMATE_RAG_ADMIN_KEY": "restart-test-key"}
    return subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--port", str(port), "--workers", "2",
                             "--data-dir", str(data_dir)], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    psutil.wait_procs(family, timeout=30)
    return family


def test_everything_killed_mid_batch_recovers_by_itself(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    port = free_port()
    base, h = f"http://127.0.0.1:{port}", {"Authorization": "Bearer restart-test-key"}
    proc = start_up(data_dir, port, log)
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "batch"}, headers=h).json()["id"]
        docs = []
        for i in range(8):
            text = "\n\n".join(f"Document {i}, paragraph {p}: the night train to the coast was delayed by a "
                               f"storm, and {p * 7 + i} passengers waited at the station." for p in range(40))
            r = httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=h,
                           files={"file": (f"d{i}.txt", text.encode())})
            assert r.status_code == 202
            docs.append(r.json()["id"])

        def some_embedding() -> bool:
            items = httpx.get(f"{base}/api/knowledge-bases/{kb}/documents", headers=h).json()["items"]
            return any(d["status"] == "EMBEDDING" for d in items)

        wait_until(some_embedding, timeout=120)
    finally:
        kill_group(proc)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_up(data_dir, port, log)
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)

        def all_stable() -> list[dict]:
            items = [httpx.get(f"{base}/api/documents/{d}", headers=h).json() for d in docs]
            return items if all(i["status"] in ("READY", "FAILED") for i in items) else []

        final = wait_until(all_stable, timeout=240)
        assert [d["status"] for d in final] == ["READY"] * len(docs), [(d["status"], d["error_message"]) for d in final]
        for d in final:
            chunks = httpx.get(f"{base}/api/documents/{d['id']}/chunks", headers=h,
                               params={"limit": 500}).json()["items"]
            assert len(chunks) == d["chunk_count"] > 0
            assert len({c["id"] for c in chunks}) == len(chunks)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=60) == 0
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise
    # the restarted `up` was the only live holder of the embedded database: it stopped it
    wait_until(lambda: not (data_dir / "pg" / "postmaster.pid").exists(), timeout=30)

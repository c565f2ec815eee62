"""Worker processes started for real (``python -m ultimate_rag.worker``), to be killed, paused,
continued and terminated by the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


class WorkerProcesses:
    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, module: str = "ultimate_rag.worker", **extra_env: str) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"worker-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", module], env={**self.env, **extra_env},
                                stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.log_dir / f"worker-{self.procs.index(proc)}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def workers(settings, tmp_path: Path) -> Iterator[WorkerProcesses]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env.update({
        "ULTIMATE_RAG_DATABASE_URL": settings.database_url,
        "ULTIMATE_RAG_DATA_DIR": str(settings.data_dir),
        "ULTIMATE_RAG_LEASE_SECONDS": "3",
        "ULTIMATE_RAG_HEARTBEAT_SECONDS": "0.5",
        "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.3",
        "ULTIMATE_RAG_RETRY_DELAY_SECONDS": "0.1",
        "ULTIMATE_RAG_EMBED_BATCH_SIZE": "2",
        "ULTIMATE_RAG_WORKER_CONCURRENCY": "2",
        "ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    })
    procs = WorkerProcesses(env, tmp_path)
    yield procs
    procs.stop_all()

from .live import live  # noqa: E402, F401  (a real API + worker over HTTP, session-wide)

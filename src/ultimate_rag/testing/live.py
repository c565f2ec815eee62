"""A real ultimate-rag deployment for tests that talk HTTP to it: ``ultimate-rag serve`` on a free
port and worker processes (``python -m ultimate_rag.worker``) on one database and data dir."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .servers import HOST, _Process, free_port


@dataclass
class LiveApi:
    database_url: str
    root: Path
    admin_key: str = "live-admin-key-0123456789"
    workers: int = 1
    port: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    _api: _Process = field(default_factory=_Process)
    _workers: list[_Process] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
        env.update({
            "ULTIMATE_RAG_DATABASE_URL": self.database_url, "ULTIMATE_RAG_DATA_DIR": str(self.data_dir),
            "ULTIMATE_RAG_ADMIN_KEY": self.admin_key, "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.3",
            "ULTIMATE_RAG_RETRY_DELAY_SECONDS": "0.1", "ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS": "0",
            "PYTHONUNBUFFERED": "1", **self.extra_env,
        })
        return env

    def start(self, timeout: float = 120.0) -> LiveApi:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        env = self.env()
        self._start_api(env)
        for i in range(self.workers):
            worker = _Process()
            worker.log = self.root / f"worker-{i}.log"
            worker.proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.worker"], env=env,
                                           stdout=worker.log.open("wb"), stderr=subprocess.STDOUT,
                                           start_new_session=True)
            self._workers.append(worker)
        self._wait_ready(timeout)
        return self

    def _start_api(self, env: dict[str, str]) -> None:
        self._api.proc = subprocess.Popen(
            [sys.executable, "-m", "ultimate_rag.cli", "serve", "--host", HOST, "--port", str(self.port)],
            env=env, stdout=(self.root / "api.log").open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
        self._api.log = self.root / "api.log"

    def stop_api(self) -> None:
        """Stop the API process alone (the workers go on): a server restart, as a client sees it."""
        self._api.stop()

    def start_api(self, timeout: float = 120.0) -> None:
        """Start the API again on the same port, and wait until it is ready."""
        self._start_api(self.env())
        self._wait_ready(timeout)

    @property
    def worker_pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None and w.proc.poll() is None]

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._api.proc is None or self._api.proc.poll() is not None:
                raise RuntimeError(f"the API exited: {self._api.log.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API was not ready in {timeout}s: {self._api.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        for process in (self._api, *self._workers):
            process.stop()

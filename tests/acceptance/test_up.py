"""``ultimate-rag up`` on the embedded default, as a newcomer runs it: a real embedded PostgreSQL
in the data dir, migrations, a worker process and the API; then Ctrl-C/SIGTERM stops everything."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from ultimate_rag.testing.eventually import eventually_sync

pytestmark = pytest.mark.acceptance


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# the one wait (ultimate_rag.testing.eventually), for probes that fail with a connection error
# until the server listens
wait_until = functools.partial(eventually_sync, ignoring=(httpx.HTTPError, OSError))


def test_up_runs_everything_and_stops_cleanly(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"PYTHONUNBUFFERED": "1", "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.5"}
    log = (tmp_path / "up.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--port", str(port), "--workers", "1",
                             "--data-dir", str(data_dir)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        key_file = data_dir / "admin.key"
        assert key_file.stat().st_mode & 0o777 == 0o600
        key = key_file.read_text().strip()
        output = (tmp_path / "up.log").read_text()
        assert key in output and base in output
        assert (data_dir / "pg" / "PG_VERSION").exists()

        h = {"Authorization": f"Bearer {key}"}
        kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "first"}, headers=h).json()["id"]
        r = httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=h,
                       files={"file": ("hello.md", "# Hello\n\n첫 번째 문서입니다. The first document.".encode())})
        assert r.status_code == 202
        doc = r.json()["id"]
        wait_until(lambda: httpx.get(f"{base}/api/documents/{doc}", headers=h).json()["status"] == "READY", timeout=90)
        # the API process's first Korean query loads BM25's Korean analyzer (about 1.5 s, several
        # times that on a busy machine: docs/search.md "Known limit"), so this one search gets a minute
        hits = httpx.post(f"{base}/api/knowledge-bases/{kb}/search", json={"query": "첫 번째 문서"}, headers=h,
                          timeout=60)
        assert hits.json()["results"][0]["document_id"] == doc
        assert httpx.get(f"{base}/api/knowledge-bases", headers={"Authorization": "Bearer nope"}).status_code == 401
        children = psutil.Process(proc.pid).children(recursive=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    _gone, alive = psutil.wait_procs(children, timeout=20)
    assert not alive, alive
    assert not (data_dir / "pg" / "postmaster.pid").exists()


def test_up_prints_the_admin_key_only_when_it_creates_it(pg_url: str, template_url: str, tmp_path: Path) -> None:
    """The key must not land in container logs and journals on every start: printed once, when made."""
    import uuid

    import psycopg
    from psycopg.conninfo import make_conninfo

    from ..conftest import TEMPLATE

    name = f"up_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"PYTHONUNBUFFERED": "1", "ULTIMATE_RAG_DATABASE_URL": make_conninfo(pg_url, dbname=name),
            "ULTIMATE_RAG_LOG_LEVEL": "WARNING"}

    def start(run: str, **extra: str) -> str:
        port = free_port()
        log_path = tmp_path / f"{run}.log"
        proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--port", str(port), "--workers", "0",
                                 "--data-dir", str(data_dir)], env=env | extra, stdout=log_path.open("wb"),
                                stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200, timeout=90)
            wait_until(lambda: "workbench" in log_path.read_text(), timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        return log_path.read_text()

    try:
        first = start("first")
        key = (data_dir / "admin.key").read_text().strip()
        assert key in first and "#key=" in first  # just created: shown this once
        again = start("again")
        assert key not in again and "#key=" not in again
        assert f"admin key: in {data_dir / 'admin.key'}" in again
        from_env = "env-admin-key-0123456789abcdef"
        env_run = start("env", ULTIMATE_RAG_ADMIN_KEY=from_env)
        assert from_env not in env_run and key not in env_run and "#key=" not in env_run
        assert "admin key: from ULTIMATE_RAG_ADMIN_KEY" in env_run
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

"""Shared bench plumbing: a throwaway embedded PostgreSQL database and the shared corpus."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import platform
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from ultimate_rag.adapters.postgres.embedded import start_embedded_postgres
from ultimate_rag.adapters.postgres.migrations import migrate

REPO = Path(__file__).resolve().parents[1]


async def wait_for_documents(container: Any, done: Callable[[dict[str, int]], bool], interval: float = 0.2) -> None:
    """Poll the documents' counts (``ready``, ``failed``, ``n``) until ``done(counts)``; a FAILED
    document ends the run."""
    while True:
        row = await container.infra.db.fetchone(
            "SELECT count(*) FILTER (WHERE status = 'READY') AS ready, count(*) FILTER (WHERE status = 'FAILED')"
            " AS failed, count(*) AS n FROM documents")
        if row["failed"]:
            raise SystemExit(f"{row['failed']} documents FAILED")
        if done(row):
            return
        await asyncio.sleep(interval)


def fresh_database() -> tuple[str, object, Path]:
    """A new migrated database in a new embedded server; returns (url, server handle, temp dir)."""
    root = Path(tempfile.mkdtemp(prefix="urag-bench-"))
    url, server = start_embedded_postgres(root)
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    db_url = make_conninfo(url, dbname=name)
    migrate(db_url)
    return db_url, server, root


def load_corpus() -> ModuleType:
    """The shared deterministic corpus (``shared/bench/corpus.py`` beside the checkout)."""
    candidates = [os.environ.get("ULTIMATE_RAG_CORPUS"), REPO.parent / "shared" / "bench" / "corpus.py"]
    for path in candidates:
        if path and Path(path).is_file():
            spec = importlib.util.spec_from_file_location("corpus", path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise SystemExit("shared/bench/corpus.py not found: set ULTIMATE_RAG_CORPUS to its path")


def machine() -> str:
    cpus = os.cpu_count()
    mem = ""
    try:
        mem_kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        mem = f", {mem_kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    return f"{platform.machine()}, {cpus} cores{mem}, Python {platform.python_version()}, commit {commit.strip()}"

"""Property-based API fuzzing with schemathesis against the app's own OpenAPI schema, over real
HTTP to a real `ultimate-rag serve` process with an admin key: no 5xx, and every response matches
the schema (status codes, content types, bodies). The number of examples is bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from psycopg.conninfo import make_conninfo
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from ..conftest import TEMPLATE
from .test_up import free_port, wait_until

pytestmark = pytest.mark.acceptance
KEY = "schemathesis-admin-key-0123456789"


@pytest.fixture(scope="module")
def server(pg_url: str, template_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    name = f"fuzz_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    port = free_port()
    data_dir: Path = tmp_path_factory.mktemp("fuzz")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_DATABASE_URL": make_conninfo(pg_url, dbname=name), "ULTIMATE_RAG_ADMIN_KEY": KEY,
            "ULTIMATE_RAG_DATA_DIR": str(data_dir), "ULTIMATE_RAG_MAX_UPLOAD_BYTES": "200000",
            "ULTIMATE_RAG_LOG_LEVEL": "WARNING"}
    log = (data_dir / "serve.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "serve", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        # something to find: a knowledge base with a document in it
        h = {"Authorization": f"Bearer {KEY}"}
        kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "fuzz"}, headers=h).json()["id"]
        httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=h, files={"file": ("a.md", b"# A\n\ntext")})
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        assert "Traceback" not in (data_dir / "serve.log").read_text(errors="replace")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_api_conforms_to_its_schema(server: str) -> None:
    """Each operation gets its own bounded hypothesis run; failures are collected and shown together.
    (schemathesis' pytest plugin does not run under this pytest version, so the loop is written out.)"""
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an Err has no ok(): it fails here, loudly
        operations += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            case.call_and_validate(base_url=server, headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                                   checks=CHECKS)

        try:
            run()
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}"[:3000])
    assert operations >= 20
    assert not failures, "\n\n".join(failures)

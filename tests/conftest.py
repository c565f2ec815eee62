"""Shared fixtures: one real embedded PostgreSQL (pgvector) per test session, a migrated template
database, and a fresh database cloned from it for every test that needs one (fast and isolated);
the real local embedding model, loaded once."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.postgres.embedded import start_embedded_postgres
from ultimate_rag.adapters.postgres.migrations import migrate
from ultimate_rag.settings import Settings

ADMIN_KEY = "test-admin-key-0123456789"
TEMPLATE = "urag_template"


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("ULTIMATE_RAG_TEST_DATABASE_URL")
    if url:
        yield url
        return
    root = tmp_path_factory.mktemp("pgserver")
    url, server = start_embedded_postgres(root)
    yield url
    server.cleanup()


@pytest.fixture(scope="session")
def template_url(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    url = make_conninfo(pg_url, dbname=TEMPLATE)
    migrate(url)
    return url


@pytest.fixture
def db_url(pg_url: str, template_url: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    yield make_conninfo(pg_url, dbname=name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def embedder() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
        retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=1_000_000,
    )


@pytest.fixture
async def container(settings: Settings, embedder: LocalE5Embedder):
    from ultimate_rag.bootstrap import build

    c = build(settings, url=settings.database_url, embedder=embedder, pool_size=8)
    await c.open()
    yield c
    await c.close()


@pytest.fixture
async def client(container) -> AsyncIterator[httpx.AsyncClient]:
    from ultimate_rag.api.app import create_app

    app = create_app(container=container)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as c:
        yield c

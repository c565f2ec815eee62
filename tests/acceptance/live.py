"""One real deployment (API + worker processes, over HTTP) shared by the tests of the HTTP surface:
the Python client, the MCP server and the HTTP commands. Each test makes its own knowledge bases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ultimate_rag.testing.live import LiveApi

from ..conftest import TEMPLATE


@dataclass
class Live:
    api: LiveApi

    @property
    def url(self) -> str:
        return self.api.url

    @property
    def admin_key(self) -> str:
        return self.api.admin_key

    def http(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key or self.admin_key}"},
                            timeout=60)

    def new_kb(self, prefix: str = "kb") -> dict:
        with self.http() as h:
            r = h.post("/api/knowledge-bases", json={"name": f"{prefix}-{uuid.uuid4().hex[:8]}"})
            r.raise_for_status()
            return r.json()

    def key(self, kb_id: str, role: str) -> str:
        with self.http() as h:
            r = h.post("/api/keys", json={"scopes": [{"knowledge_base_id": kb_id, "role": role}]})
            r.raise_for_status()
            return r.json()["key"]


@pytest.fixture(scope="session")
def live(pg_url: str, template_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    name = f"live_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    api = LiveApi(make_conninfo(pg_url, dbname=name), tmp_path_factory.mktemp("live")).start()
    try:
        yield Live(api)
    finally:
        api.stop()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

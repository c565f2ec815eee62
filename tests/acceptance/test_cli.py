"""The CLI against a real database: migrate is idempotent, keys create prints the key alone on the
last line, and the key it prints works."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import psycopg
import pytest

from ultimate_rag.adapters.postgres.migrations import available_migrations, current_version

from ..integration.catalog import catalog, empty_database

pytestmark = pytest.mark.acceptance


def cli(settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_DATABASE_URL": settings.database_url, "ULTIMATE_RAG_DATA_DIR": str(settings.data_dir)}
    return subprocess.run([sys.executable, "-m", "ultimate_rag.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_migrate_is_idempotent(pg_url: str, tmp_path) -> None:
    """On an empty database: the first run applies every migration, the second applies none and
    leaves the schema and the migration records exactly as they were."""
    with empty_database(pg_url) as url:
        target = SimpleNamespace(database_url=url, data_dir=tmp_path / "data")
        first = cli(target, "migrate")
        assert first.returncode == 0, first.stderr
        assert current_version(url) == available_migrations()[-1].version
        schema, records = catalog(url), migration_records(url)
        second = cli(target, "migrate")
        assert second.returncode == 0 and "up to date" in second.stdout, second.stdout + second.stderr
        assert catalog(url) == schema and migration_records(url) == records


def migration_records(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT version, name, applied_at FROM schema_migrations ORDER BY version").fetchall()


async def test_keys_create_prints_the_key_last_and_it_works(settings, client) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "k"})).json()["id"]
    reader = cli(settings, "keys", "create", "--kb", kb, "--role", "reader")
    assert reader.returncode == 0, reader.stderr
    key = reader.stdout.strip().splitlines()[-1]
    assert key.startswith("urk_") and " " not in key
    r = await client.get(f"/api/knowledge-bases/{kb}", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200
    r = await client.post("/api/knowledge-bases", json={"name": "x"}, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 403

    admin = cli(settings, "keys", "create", "--admin").stdout.strip().splitlines()[-1]
    r = await client.post("/api/knowledge-bases", json={"name": "y"}, headers={"Authorization": f"Bearer {admin}"})
    assert r.status_code == 201
    assert cli(settings, "keys", "create").returncode == 2


async def test_keys_list_and_revoke(settings, client) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": "k"})).json()["id"]
    created = cli(settings, "keys", "create", "--kb", kb, "--role", "editor", "--name", "ci bot",
                  "--expires-in-days", "30")
    key = created.stdout.strip().splitlines()[-1]
    prefix = key.split("_")[1]
    listing = cli(settings, "keys", "list")
    assert listing.returncode == 0
    line = next(ln for ln in listing.stdout.splitlines() if ln.startswith(prefix))
    assert "editor" in line and "active" in line and "ci bot" in line
    assert key not in listing.stdout and key.split("_", 2)[2] not in listing.stdout  # never the secret
    h = {"Authorization": f"Bearer {key}"}
    assert (await client.get(f"/api/knowledge-bases/{kb}", headers=h)).status_code == 200
    revoked = cli(settings, "keys", "revoke", prefix)
    assert revoked.returncode == 0 and prefix in revoked.stdout
    assert (await client.get(f"/api/knowledge-bases/{kb}", headers=h)).status_code == 401  # the next request
    assert "revoked" in next(ln for ln in cli(settings, "keys", "list").stdout.splitlines() if ln.startswith(prefix))
    assert cli(settings, "keys", "revoke", "nosuchkey").returncode == 1

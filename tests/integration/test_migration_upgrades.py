"""A fresh ``migrate`` and an upgrade from every earlier version end in the same schema.

For each migration file N but the last (whatever files exist: numbers have gaps), a new database
is migrated up to N by the real ``migrate`` (shown only the files up to N), given rows in the core
tables as a deployment at N would hold, then migrated to the head; its catalog must equal the
catalog of a database migrated from nothing, and the rows must have survived."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from ultimate_rag.adapters.postgres import migrations as migrations_module
from ultimate_rag.adapters.postgres.migrations import available_migrations, current_version, migrate

from .catalog import catalog, differences, empty_database

MIGRATIONS = available_migrations()
VERSIONS = [m.version for m in MIGRATIONS]


@pytest.fixture(scope="module")
def fresh(pg_url: str) -> dict[str, list[tuple[str, ...]]]:
    with empty_database(pg_url) as url:
        assert migrate(url) == VERSIONS
        return catalog(url)


@pytest.fixture
def empty_db(pg_url: str) -> Iterator[str]:
    with empty_database(pg_url) as url:
        yield url


def seed(url: str) -> dict[str, int]:
    """Rows in the tables of the first migration, with its columns only (later migrations must keep
    them working): a knowledge base, documents in several statuses with their jobs, chunks, an asset,
    an API key and an embedding cache entry that one of the chunks vouches for."""
    kb = uuid.uuid4()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO knowledge_bases (id, name, description) VALUES (%s, %s, 'upgraded')", (kb, f"kb-{kb}"))
        docs = []
        for status, job in (("READY", "SUCCEEDED"), ("FAILED", "FAILED"), ("PENDING", "PENDING"),
                            ("EMBEDDING", "RUNNING"), ("DELETED", "SUCCEEDED"), ("OUTDATED", "SUCCEEDED")):
            doc = uuid.uuid4()
            docs.append(doc)
            conn.execute(
                "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,"
                " status, chunk_count, duplicate_of) VALUES (%s, %s, %s, 'text/plain', 5, %s, %s, %s, 1, %s)",
                (doc, kb, f"{status.lower()}.txt", hashlib.sha256(status.encode()).hexdigest(), f"{kb}/{doc}/source",
                 status, docs[0] if status == "OUTDATED" else None))
            conn.execute(
                "INSERT INTO ingestion_jobs (id, document_id, status, attempts, max_attempts, locked_by, locked_at)"
                " VALUES (%s, %s, %s, 1, 3, %s, CASE WHEN %s THEN now() END)",
                (uuid.uuid4(), doc, job, "w1" if job == "RUNNING" else None, job == "RUNNING"))
            conn.execute(
                "INSERT INTO chunks (id, document_id, knowledge_base_id, ordinal, content, token_count, locator)"
                " VALUES (%s, %s, %s, 0, %s, 3, '{\"line_start\": 1}')",
                (uuid.uuid4(), doc, kb, f"passage of the {status.lower()} document"))
        conn.execute(
            "INSERT INTO document_assets (id, document_id, knowledge_base_id, object_key, mime_type, size_bytes,"
            " page, locator_key) VALUES (%s, %s, %s, 'k/asset', 'image/png', 10, 1, 'p1-i0')",
            (uuid.uuid4(), docs[0], kb))
        conn.execute("INSERT INTO api_keys (id, prefix, key_hash, scopes) VALUES (%s, 'abcd1234', 'h', %s)",
                     (uuid.uuid4(), f'[{{"knowledge_base_id": "{kb}", "role": "reader"}}]'))
        cache_columns = {row[0] for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'embedding_cache'")}
        scoped = "knowledge_base_id" in cache_columns  # the cache is per knowledge base since 0007
        conn.execute(f"INSERT INTO embedding_cache (model, text_hash, embedding{', knowledge_base_id' * scoped})"
                     f" VALUES ('m', %s, '[1,2,3]'{', %s' * scoped})",
                     (hashlib.sha256(b"passage of the ready document").digest(), *([kb] * scoped)))
    return counts(url)


def counts(url: str) -> dict[str, int]:
    """Rows an upgrade must never lose (chunks and cache entries may go by a migration's rule)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                for table in ("knowledge_bases", "documents", "ingestion_jobs", "document_assets", "api_keys")}
    return {table: row[0] for table, row in rows.items() if row is not None}


def test_the_migration_files_are_numbered_in_order_once_each() -> None:
    assert VERSIONS == sorted(set(VERSIONS)) and VERSIONS[0] == 1
    assert all(m.sql.strip() for m in MIGRATIONS)


@pytest.mark.parametrize("start", VERSIONS[:-1], ids=[f"from-{v:04d}" for v in VERSIONS[:-1]])
def test_an_upgrade_from_every_earlier_version_equals_a_fresh_migrate(
        start: int, empty_db: str, fresh: dict[str, list[tuple[str, ...]]], monkeypatch: pytest.MonkeyPatch) -> None:
    older = [m for m in MIGRATIONS if m.version <= start]
    with monkeypatch.context() as patch:  # the release that shipped ``start`` knew only these files
        patch.setattr(migrations_module, "available_migrations", lambda: older)
        assert migrate(empty_db) == [m.version for m in older]
    assert current_version(empty_db) == start
    before = seed(empty_db)

    assert migrate(empty_db) == [v for v in VERSIONS if v > start]

    assert current_version(empty_db) == VERSIONS[-1]
    upgraded = catalog(empty_db)
    assert upgraded == fresh, "\n".join(differences(upgraded, fresh))
    assert counts(empty_db) == before


def test_migrating_twice_changes_nothing(empty_db: str, fresh: dict[str, list[tuple[str, ...]]]) -> None:
    assert migrate(empty_db) == VERSIONS
    seed(empty_db)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        applied = conn.execute("SELECT version, name, applied_at FROM schema_migrations ORDER BY version").fetchall()
    assert migrate(empty_db) == []
    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert conn.execute("SELECT version, name, applied_at FROM schema_migrations ORDER BY version").fetchall() == applied
    assert catalog(empty_db) == fresh

"""Migration 0008 on a database that already holds data (the migrations before it applied, as on an
installation upgraded from the version before it; the later ones then apply on top): READY documents are published with no manual step, their
chunks and assets belong to their current revision, and nothing else is searchable."""

from __future__ import annotations

import uuid

import psycopg

from ultimate_rag.adapters.postgres.migrations import available_migrations

from .catalog import empty_database


def test_ready_documents_are_published_by_the_upgrade(pg_url: str) -> None:
    with empty_database(pg_url) as url, psycopg.connect(url, autocommit=True) as conn:
        migrations = {m.version: m.sql for m in available_migrations()}
        for version in sorted(v for v in migrations if v < 8):
            conn.execute(migrations[version].encode())
        kb, ready, failed, queued = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        conn.execute("INSERT INTO knowledge_bases (id, name) VALUES (%s, 'kb')", (kb,))
        for doc, status, revision in ((ready, "READY", 2), (failed, "FAILED", 1), (queued, "PENDING", 3)):
            conn.execute("INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256,"
                         " object_key, status, content_revision) VALUES (%s, %s, 'f', 'text/plain', 1, 'x', 'k',"
                         " %s, %s)", (doc, kb, status, revision))
        for ordinal in range(2):
            conn.execute("INSERT INTO chunks (id, document_id, knowledge_base_id, ordinal, content, token_count)"
                         " VALUES (%s, %s, %s, %s, 'passage', 1)", (uuid.uuid4(), ready, kb, ordinal))
        conn.execute("INSERT INTO document_assets (id, document_id, knowledge_base_id, object_key, mime_type,"
                     " size_bytes, locator_key) VALUES (%s, %s, %s, 'a', 'image/png', 1, 'p1')",
                     (uuid.uuid4(), ready, kb))

        for version in sorted(v for v in migrations if v >= 8):
            conn.execute(migrations[version].encode())

        rows = conn.execute("SELECT id, published_revision FROM documents").fetchall()
        published: dict[uuid.UUID, int | None] = dict(rows)
        assert published == {ready: 2, failed: None, queued: None}
        assert conn.execute("SELECT DISTINCT revision FROM chunks").fetchall() == [(2,)]
        assert conn.execute("SELECT revision FROM document_assets").fetchall() == [(2,)]
        searchable = conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE c.revision = d.published_revision").fetchone()
        assert searchable == (2,)

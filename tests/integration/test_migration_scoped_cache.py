"""Migration 0007 on a database that already holds data: shared cache entries are kept for each
knowledge base whose own chunks hold the text (a re-ingest after the upgrade still hits the cache),
the rest are dropped, and a document a crashed API left UPLOADING fails with a readable reason."""

from __future__ import annotations

import hashlib
import uuid

import psycopg

from ultimate_rag.adapters.postgres.migrations import available_migrations

from .catalog import empty_database


def test_the_shared_cache_is_split_by_knowledge_base_on_upgrade(pg_url: str) -> None:
    with empty_database(pg_url) as url, psycopg.connect(url, autocommit=True) as conn:
        migrations = {m.version: m.sql for m in available_migrations()}
        for version in range(1, 7):
            conn.execute(migrations[version].encode())
        kb_a, kb_b, doc, stuck = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        for kb in (kb_a, kb_b):
            conn.execute("INSERT INTO knowledge_bases (id, name) VALUES (%s, %s)", (kb, str(kb)))
        for d, status in ((doc, "READY"), (stuck, "UPLOADING")):
            conn.execute("INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256,"
                         " object_key, status, chunk_count) VALUES (%s, %s, 'f', 'text/plain', 1, 'x', 'k', %s, 1)",
                         (d, kb_a, status))
        conn.execute("INSERT INTO chunks (id, document_id, knowledge_base_id, ordinal, content, token_count)"
                     " VALUES (%s, %s, %s, 0, 'kept passage', 2), (%s, %s, %s, 0, 'stuck passage', 2)",
                     (uuid.uuid4(), doc, kb_a, uuid.uuid4(), stuck, kb_a))
        for text in ("kept passage", "nobody's passage"):
            conn.execute("INSERT INTO embedding_cache (model, text_hash, embedding) VALUES ('m', %s, '[1,2,3]')",
                         (hashlib.sha256(text.encode()).digest(),))

        conn.execute(migrations[7].encode())

        rows = conn.execute("SELECT knowledge_base_id, text_hash FROM embedding_cache").fetchall()
        assert rows == [(kb_a, hashlib.sha256(b"kept passage").digest())]
        row = conn.execute("SELECT status, error_message FROM documents WHERE id = %s", (stuck,)).fetchone()
        assert row is not None
        status, message = row
        assert status == "FAILED" and "re-upload was interrupted" in message
        assert conn.execute("SELECT count(*) FROM chunks WHERE document_id = %s", (stuck,)).fetchone() == (0,)
        conn.execute("DELETE FROM knowledge_bases WHERE id = %s", (kb_b,))  # the foreign key holds

"""Deduplication facts in PostgreSQL: content hashes, MinHash signatures and LSH bands, looked up
under a per-knowledge-base advisory lock so two workers judging near-duplicates at the same moment
decide one after the other (exactly one stays READY)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ...domain.dedup import Candidate
from ...domain.status import ALLOWED_TRANSITIONS, DocumentStatus
from .database import Connection

# documents that can be matched: indexed ones, ones on their way whose signature is recorded, and
# any whose published revision search serves (a rebuild queued or failed)
_MATCHABLE = "('READY', 'PARSING', 'CHUNKING', 'EMBEDDING', 'INDEXING')"


async def lock_knowledge_base(conn: Connection, knowledge_base_id: UUID) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (f"dedup:{knowledge_base_id}",))


async def candidates(conn: Connection, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                     bands: list[tuple[int, int]] | None, exempt: list[UUID]) -> list[Candidate]:
    """Documents with the same normalized text, and (near mode) those sharing an LSH band."""
    # two index lookups (same hash; a shared band), never a scan of the knowledge base's documents
    band_ids = ""
    params: dict[str, Any] = {"kb": knowledge_base_id, "doc": document_id, "hash": text_hash,
                              "exempt": exempt or []}
    if bands:
        band_ids = (" UNION SELECT b.document_id FROM document_hash_bands b"
                    " JOIN unnest(%(band_idx)s::smallint[], %(band_hash)s::bigint[]) AS q(band, hash)"
                    " ON b.band = q.band AND b.hash = q.hash WHERE b.knowledge_base_id = %(kb)s")
        params |= {"band_idx": [b for b, _ in bands], "band_hash": [h for _, h in bands]}
    rows = await (await conn.execute(
        "WITH ids AS (SELECT id AS document_id FROM documents"
        f" WHERE knowledge_base_id = %(kb)s AND content_hash = %(hash)s{band_ids})"
        " SELECT d.id, d.filename, d.content_hash, d.minhash, d.created_at, d.source"
        " FROM ids JOIN documents d ON d.id = ids.document_id"
        f" WHERE d.id <> %(doc)s AND (d.status IN {_MATCHABLE} OR d.published_revision IS NOT NULL)"
        " AND d.id <> ALL(%(exempt)s::uuid[])"
        " AND d.content_hash IS NOT NULL ORDER BY d.created_at, d.id LIMIT 200", params)).fetchall()
    return [Candidate(r["id"], r["filename"], r["content_hash"], list(r["minhash"]) if r["minhash"] else None,
                      r["created_at"], r["source"] or {}) for r in rows]


async def record_signature(conn: Connection, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                           hashvalues: list[int] | None, bands: list[tuple[int, int]] | None) -> None:
    """Replace the document's hash, signature and bands (a reindex starts over)."""
    await conn.execute("DELETE FROM document_hash_bands WHERE document_id = %s", (document_id,))
    await conn.execute("UPDATE documents SET content_hash = %s, minhash = %s WHERE id = %s",
                       (text_hash, hashvalues, document_id))
    if bands:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO document_hash_bands (document_id, knowledge_base_id, band, hash) VALUES (%s, %s, %s, %s)",
                [(document_id, knowledge_base_id, b, h) for b, h in bands])


async def record_verdict(conn: Connection, document_id: UUID, verdict: dict[str, Any]) -> None:
    await conn.execute("UPDATE documents SET dedup = %s WHERE id = %s", (Jsonb(verdict), document_id))


async def outdate(conn: Connection, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
    """Make ``older`` OUTDATED (duplicate_of = ``newer``): its chunks and hash bands go, its job ends
    (a worker still on it loses its lease). Locks its job row, then its document row. Returns False
    when it is no longer in a state that can be outdated."""
    await conn.execute("SELECT id FROM ingestion_jobs WHERE document_id = %s FOR UPDATE", (older,))
    row = await (await conn.execute("SELECT status FROM documents WHERE id = %s FOR UPDATE", (older,))).fetchone()
    if row is None or (row["status"], DocumentStatus.OUTDATED) not in ALLOWED_TRANSITIONS:
        return False
    await conn.execute(
        "UPDATE ingestion_jobs SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, finished_at = now(),"
        " updated_at = now() WHERE document_id = %s", (older,))
    await conn.execute("DELETE FROM chunks WHERE document_id = %s", (older,))
    await conn.execute("DELETE FROM document_hash_bands WHERE document_id = %s", (older,))
    await conn.execute(
        "UPDATE documents SET status = 'OUTDATED', duplicate_of = %s, dedup = %s, chunk_count = 0,"
        " published_revision = NULL,"
        " progress = '{}'::jsonb, error_message = NULL, updated_at = now() WHERE id = %s",
        (newer, Jsonb(verdict), older))
    return True

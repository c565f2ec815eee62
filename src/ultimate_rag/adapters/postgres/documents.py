"""Document rows seen from the API side: creation with its job, reads, listing, reindex."""

from __future__ import annotations

import base64
import builtins
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from psycopg import sql
from psycopg.types.json import Jsonb

from ...domain.errors import ConflictError, ResourceNotFoundError
from ...domain.models import Chunk, Document, DocumentAsset
from ...domain.search import SearchFilters
from ...domain.status import DocumentStatus
from . import rows
from .database import Connection, Database
from .search_filters import document_conditions, heading_condition, searchable_chunk

NOTIFY_CHANNEL = "ultimate_rag_jobs"


class DocumentRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_with_job(
        self, *, document_id: UUID, knowledge_base_id: UUID, filename: str, mime_type: str,
        size_bytes: int, sha256: str, object_key: str, max_attempts: int,
        source: dict[str, Any] | None = None,
    ) -> Document:
        """Document (PENDING) and its job (PENDING) in one transaction, then wake a worker."""
        async with self._db.transaction() as conn:
            kb = await (await conn.execute(
                "SELECT deleting FROM knowledge_bases WHERE id = %s FOR SHARE", (knowledge_base_id,)
            )).fetchone()
            if kb is None:
                raise ResourceNotFoundError("knowledge base not found")
            if kb["deleting"]:
                raise ConflictError("knowledge base is being deleted")
            await conn.execute(
                "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256,"
                " object_key, status, source, stage_timings)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, 'PENDING', %s, jsonb_build_object('PENDING', now()))",
                (document_id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,
                 Jsonb(source or {"kind": "upload"})),
            )
            await conn.execute(
                "INSERT INTO ingestion_jobs (id, document_id, status, max_attempts)"
                " VALUES (%s, %s, 'PENDING', %s)",
                (uuid4(), document_id, max_attempts),
            )
            await notify_workers(conn)
        return await self.get(document_id)

    async def get(self, document_id: UUID) -> Document:
        row = await self._db.fetchone(
            f"SELECT {rows.DOCUMENT_COLUMNS} FROM {rows.DOCUMENT_FROM} WHERE d.id = %s", (document_id,)
        )
        if row is None:
            raise ResourceNotFoundError("document not found")
        return rows.document(row)

    async def job_history(self, document_id: UUID) -> list[dict[str, Any]]:
        row = await self._db.fetchone(
            "SELECT error_history FROM ingestion_jobs WHERE document_id = %s", (document_id,)
        )
        return list(row["error_history"]) if row else []

    async def list(
        self, knowledge_base_id: UUID, *, status: DocumentStatus | None, limit: int, cursor: str | None,
        filename_contains: str | None = None,
    ) -> tuple[list[Document], str | None]:
        """Newest first; keyset pagination on (created_at, id) so deep pages stay fast."""
        where = ["d.knowledge_base_id = %(kb)s"]
        params: dict[str, Any] = {"kb": knowledge_base_id, "limit": limit + 1}
        if status is not None:
            where.append("d.status = %(status)s")
            params["status"] = status.value
        if filename_contains:  # case-insensitive substring; LIKE wildcards in the text are literal
            escaped = filename_contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("d.filename ILIKE %(q)s")
            params["q"] = f"%{escaped}%"
        if cursor:
            created_at, last_id = decode_cursor(cursor)
            where.append("(d.created_at, d.id) < (%(c_at)s, %(c_id)s)")
            params |= {"c_at": created_at, "c_id": last_id}
        found = await self._db.fetchall(
            f"SELECT {rows.DOCUMENT_COLUMNS} FROM {rows.DOCUMENT_FROM} WHERE {' AND '.join(where)}"
            " ORDER BY d.created_at DESC, d.id DESC LIMIT %(limit)s",
            params,
        )
        items = [rows.document(r) for r in found[:limit]]
        next_cursor = encode_cursor(items[-1].created_at, items[-1].id) if len(found) > limit else None
        return items, next_cursor

    async def chunks(self, document_id: UUID, *, after_ordinal: int = -1,
                     limit: int | None = None) -> builtins.list[Chunk]:  # `list` here is the method above
        """In order; a page of ``limit`` chunks after ``after_ordinal`` when asked for one."""
        found = await self._db.fetchall(
            "SELECT * FROM chunks WHERE document_id = %s AND ordinal > %s ORDER BY ordinal LIMIT %s",
            (document_id, after_ordinal, limit),
        )
        return [rows.chunk(r) for r in found]

    async def published_chunk_ids(self, document_id: UUID) -> builtins.list[UUID]:
        return await published_chunk_ids(self._db, document_id)

    async def assets(self, document_id: UUID) -> builtins.list[DocumentAsset]:
        """The published revision's assets (with none published, those of the revision last built)."""
        found = await self._db.fetchall(
            "SELECT a.* FROM document_assets a JOIN documents d ON d.id = a.document_id WHERE a.document_id = %s"
            " AND a.revision = coalesce(d.published_revision, d.content_revision)"
            " ORDER BY a.page NULLS FIRST, a.locator_key",
            (document_id,),
        )
        return [rows.asset(r) for r in found]

    async def ready_chunks(self, knowledge_base_id: UUID, chunk_ids: builtins.list[UUID],
                           filters: SearchFilters | None = None) -> builtins.list[dict[str, Any]]:
        """The double filter (SPEC §4 rule 3): only chunks of their document's published revision as
        PostgreSQL records it right now — and that pass the search filters — whatever the vector
        store proposed."""
        conds, params = (document_conditions(filters) if filters else ([], {}))
        hconds, hparams = (heading_condition(filters) if filters else ([], {}))
        extra = sql.SQL("").join(sql.SQL(" AND ") + c for c in [*conds, *hconds])
        return await self._db.fetchall(
            sql.SQL("SELECT c.id, c.document_id, c.content, c.heading_path, c.locator, c.metadata, d.filename"
                    " FROM chunks c JOIN documents d ON d.id = c.document_id"
                    " WHERE c.id = ANY(%(ids)s) AND c.knowledge_base_id = %(kb)s AND d.knowledge_base_id = %(kb)s"
                    " AND {}{}").format(searchable_chunk(), extra),
            {"ids": chunk_ids, "kb": knowledge_base_id, **params, **hparams},
        )


async def published_chunk_ids(db: Database, document_id: UUID) -> list[UUID]:
    """The chunks of the document's published revision: the vectors to keep when the others go."""
    rows = await db.fetchall(
        sql.SQL("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.document_id = %s AND {}"
                ).format(searchable_chunk()), (document_id,))
    return [r["id"] for r in rows]


async def reset_job(conn: Connection, document_id: UUID, *, operation: str, force: bool, max_attempts: int) -> None:
    await conn.execute(
        "UPDATE ingestion_jobs SET status = 'PENDING', operation = %s, force = %s, attempts = 0,"
        " max_attempts = %s, available_at = now(), locked_by = NULL, locked_at = NULL,"
        " last_error = NULL, finished_at = NULL, updated_at = now(), queued_at = now(),"
        " lost_streak = 0, lost_workers = '{}', lost_since = NULL WHERE document_id = %s",
        (operation, force, max_attempts, document_id),
    )


async def notify_workers(conn: Connection) -> None:
    """Delivered at commit: idle workers wake at once instead of waiting for their next poll."""
    await conn.execute("SELECT pg_notify(%s, '')", (NOTIFY_CHANNEL,))


def encode_cursor(created_at: datetime, document_id: UUID) -> str:
    raw = f"{created_at.isoformat()}|{document_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    from ...domain.errors import InvalidRequestError

    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, _, ident = raw.partition("|")
        return datetime.fromisoformat(created), UUID(ident)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError("invalid cursor") from exc

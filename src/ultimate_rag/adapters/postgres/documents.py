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
from ...domain.metadata import merge_patch
from ...domain.models import Chunk, Document, DocumentAsset
from ...domain.search import SearchFilters
from ...domain.status import DocumentStatus, JobStatus, job_sources_of, names
from . import rows
from .database import Connection, Database
from .search_filters import chunk_filters, like_escape, searchable_chunk
from .sql import load_queries

NOTIFY_CHANNEL = "ultimate_rag_jobs"
Q = load_queries("documents.sql")
_COLUMNS = sql.SQL(Q["document_columns"])
_GET = sql.SQL(Q["get_document"]).format(columns=_COLUMNS)
_CREATE = sql.SQL(Q["create_with_job"]).format(columns=_COLUMNS)


class DocumentRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_with_job(
        self, *, document_id: UUID, knowledge_base_id: UUID, filename: str, mime_type: str,
        size_bytes: int, sha256: str, object_key: str, max_attempts: int,
        source: dict[str, Any] | None = None, uploaded_by: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Document:
        """Document (PENDING) and its job (PENDING), the workers woken, and with ``uploaded_by`` (an
        API key's prefix) the upload's audit entry: one statement."""
        row = await self._db.fetchone(_CREATE, {"uploaded_by": uploaded_by,
            "id": document_id, "kb": knowledge_base_id, "filename": filename, "mime_type": mime_type,
            "size_bytes": size_bytes, "sha256": sha256, "object_key": object_key,
            "source": Jsonb(source or {"kind": "upload"}), "metadata": Jsonb(metadata or {}),
            "job_id": uuid4(), "max_attempts": max_attempts,
            "channel": NOTIFY_CHANNEL})
        if row is None:
            raise ResourceNotFoundError("knowledge base not found")
        if row["deleting"]:
            raise ConflictError("knowledge base is being deleted")
        return rows.document(row)

    async def get(self, document_id: UUID) -> Document:
        row = await self._db.fetchone(_GET, {"id": document_id})
        if row is None:
            raise ResourceNotFoundError("document not found")
        return rows.document(row)

    async def update_metadata(self, document_id: UUID, patch: dict[str, Any]) -> Document:
        """A JSON Merge Patch of the document's own fields (domain/metadata.py ``merge_patch``),
        merged under the row's lock; nothing else changes, so search sees it at once."""
        async with self._db.transaction() as conn:
            row = await (await conn.execute(Q["metadata_for_update"], {"id": document_id})).fetchone()
            if row is None:
                raise ResourceNotFoundError("document not found")
            merged = merge_patch(row["metadata"] or {}, patch)
            await conn.execute(Q["set_metadata"], {"id": document_id, "metadata": Jsonb(merged)})
        return await self.get(document_id)

    async def job_history(self, document_id: UUID) -> list[dict[str, Any]]:
        row = await self._db.fetchone(Q["job_history"], {"id": document_id})
        return list(row["error_history"]) if row else []

    async def list(
        self, knowledge_base_id: UUID, *, status: DocumentStatus | None, limit: int, cursor: str | None,
        filename_contains: str | None = None,
    ) -> tuple[list[Document], str | None]:
        """Newest first; keyset pagination on (created_at, id) so deep pages stay fast."""
        where = [Q["list_in_kb"]]
        params: dict[str, Any] = {"kb": knowledge_base_id, "limit": limit + 1}
        if status is not None:
            where.append(Q["list_by_status"])
            params["status"] = status.value
        if filename_contains:  # case-insensitive substring; LIKE wildcards in the text are literal
            where.append(Q["list_by_filename"])
            params["q"] = f"%{like_escape(filename_contains)}%"
        if cursor:
            created_at, last_id = decode_cursor(cursor)
            where.append(Q["list_after_cursor"])
            params |= {"c_at": created_at, "c_id": last_id}
        found = await self._db.fetchall(
            sql.SQL(Q["list_documents"]).format(columns=_COLUMNS,
                                                conditions=sql.SQL(" AND ").join(sql.SQL(w) for w in where)),
            params)
        items = [rows.document(r) for r in found[:limit]]
        next_cursor = encode_cursor(items[-1].created_at, items[-1].id) if len(found) > limit else None
        return items, next_cursor

    async def chunks(self, document_id: UUID, *, after_ordinal: int = -1,
                     limit: int | None = None) -> builtins.list[Chunk]:  # `list` here is the method above
        """In order; a page of ``limit`` chunks after ``after_ordinal`` when asked for one."""
        found = await self._db.fetchall(Q["chunks_page"], {"id": document_id, "after": after_ordinal,
                                                           "limit": limit})
        return [rows.chunk(r) for r in found]

    async def published_chunk_ids(self, document_id: UUID) -> builtins.list[UUID]:
        return await published_chunk_ids(self._db, document_id)

    async def assets(self, document_id: UUID) -> builtins.list[DocumentAsset]:
        """The published revision's assets (with none published, those of the revision last built)."""
        found = await self._db.fetchall(Q["document_assets"], {"id": document_id})
        return [rows.asset(r) for r in found]

    async def ready_chunks(self, knowledge_base_id: UUID, chunk_ids: builtins.list[UUID],
                           filters: SearchFilters | None = None) -> builtins.list[dict[str, Any]]:
        """The double filter (SPEC §4 rule 3): only chunks of their document's published revision as
        PostgreSQL records it right now — and that pass the search filters — whatever the vector
        store proposed."""
        extra, params = chunk_filters(filters)
        return await self._db.fetchall(
            sql.SQL(Q["ready_chunks"]).format(searchable=searchable_chunk(), filters=extra),
            {"ids": chunk_ids, "kb": knowledge_base_id, **params},
        )


async def published_chunk_ids(db: Database, document_id: UUID) -> list[UUID]:
    """The chunks of the document's published revision: the vectors to keep when the others go."""
    rows = await db.fetchall(sql.SQL(Q["published_chunk_ids"]).format(searchable=searchable_chunk()),
                             {"id": document_id})
    return [r["id"] for r in rows]


# the job statuses a job may be queued again from (the job table): what reset_job passes to SQL
RESET_JOB_SOURCES = names(job_sources_of(JobStatus.PENDING))


async def reset_job(conn: Connection, document_id: UUID, *, operation: str, force: bool, max_attempts: int,
                    source: str = "") -> None:
    """``source``: who queued it, within its knowledge base (its flow in the claim's fair order)."""
    await conn.execute(Q["reset_job"], {"operation": operation, "force": force, "max_attempts": max_attempts,
                                        "id": document_id, "job_from": RESET_JOB_SOURCES, "source": source})


async def notify_workers(conn: Connection) -> None:
    """Delivered at commit: idle workers wake at once instead of waiting for their next poll."""
    await conn.execute(Q["notify_workers"], {"channel": NOTIFY_CHANNEL})


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

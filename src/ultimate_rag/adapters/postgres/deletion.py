"""What the delete pipeline reads from PostgreSQL inside its fenced transaction (``deletion.sql``):
the objects a document owns besides its source."""

from __future__ import annotations

from uuid import UUID

from .database import Connection
from .sql import load_queries

Q = load_queries("deletion.sql")


async def asset_keys(conn: Connection, document_id: UUID) -> list[str]:
    rows = await (await conn.execute(Q["asset_keys"], {"id": document_id})).fetchall()
    return [r["object_key"] for r in rows]

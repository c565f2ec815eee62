"""SPEC §10's search filters as a SQL condition on a row's ``document_id`` and ``chunk_id`` columns,
so they restrict *inside* the vector query (HNSW with iterative scan, or the exact fallback) and in
the double filter alike. Values travel as parameters; only column names are composed."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import sql

from ...domain.search import SearchFilters, glob_to_regex


def searchable_document(alias: str = "d") -> sql.Composable:
    """SPEC §4 rule 3, the searchable rule, in one place: a document is searchable while it has a
    published revision (the last one that reached READY; NULL once deleted or OUTDATED)..."""
    return sql.SQL("{}.published_revision IS NOT NULL").format(sql.Identifier(alias))


def searchable_chunk(chunk: str = "c", document: str = "d") -> sql.Composable:
    """... and of that document only the chunks of its published revision are (never a half-built
    revision, even if a crashed worker left its vectors behind)."""
    return sql.SQL("{}.revision = {}.published_revision").format(sql.Identifier(chunk), sql.Identifier(document))


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def document_conditions(filters: SearchFilters, alias: str = "d") -> tuple[list[sql.Composable], dict[str, Any]]:
    """Conditions on the documents table (aliased ``alias``) for the document-level filters."""
    d = sql.Identifier(alias)
    conds: list[sql.Composable] = []
    params: dict[str, Any] = {}
    if filters.document_ids is not None:
        conds.append(sql.SQL("{}.id = ANY(%(f_document_ids)s)").format(d))
        params["f_document_ids"] = list(filters.document_ids)
    if filters.filename is not None:
        conds.append(sql.SQL("{}.filename ~ %(f_filename)s").format(d))
        params["f_filename"] = glob_to_regex(filters.filename)
    if filters.mime_types is not None:
        conds.append(sql.SQL("{}.mime_type = ANY(%(f_mime_types)s)").format(d))
        params["f_mime_types"] = list(filters.mime_types)
    for name, column, op in (("created_after", "created_at", ">="), ("created_before", "created_at", "<="),
                             ("updated_after", "updated_at", ">="), ("updated_before", "updated_at", "<=")):
        value = getattr(filters, name)
        if value is not None:
            conds.append(sql.SQL("{}.{} " + op + " %(f_" + name + ")s").format(d, sql.Identifier(column)))
            params[f"f_{name}"] = value
    if filters.connector_id is not None:
        conds.append(sql.SQL("{}.connector_id = %(f_connector_id)s").format(d))
        params["f_connector_id"] = filters.connector_id
    return conds, params


def heading_condition(filters: SearchFilters, alias: str = "c") -> tuple[list[sql.Composable], dict[str, Any]]:
    if filters.heading is None:
        return [], {}
    return ([sql.SQL("array_to_string({}.heading_path, ' / ') ILIKE %(f_heading)s").format(sql.Identifier(alias))],
            {"f_heading": "%" + like_escape(filters.heading) + "%"})


def vector_row_filter(filters: SearchFilters | None, *, kb_param: str = "kb", document_column: str = "document_id",
                      chunk_column: str = "chunk_id") -> tuple[sql.Composable, dict[str, Any]]:
    """`` AND ...`` (or nothing) restricting rows of a vector table to the filters."""
    if filters is None or filters.empty:
        return sql.SQL(""), {}
    parts: list[sql.Composable] = []
    conds, params = document_conditions(filters)
    if conds:
        parts.append(sql.SQL("{} IN (SELECT d.id FROM documents d WHERE d.knowledge_base_id = %({})s AND {})").format(
            sql.Identifier(document_column), sql.SQL(kb_param), sql.SQL(" AND ").join(conds)))
    hconds, hparams = heading_condition(filters)
    if hconds:
        parts.append(sql.SQL("{} IN (SELECT c.id FROM chunks c WHERE c.knowledge_base_id = %({})s AND {})").format(
            sql.Identifier(chunk_column), sql.SQL(kb_param), hconds[0]))
        params |= hparams
    return sql.SQL(" AND ") + sql.SQL(" AND ").join(parts), params


async def matching_document_ids(db: Any, knowledge_base_id: UUID, filters: SearchFilters) -> list[UUID]:
    """Searchable documents of the knowledge base that pass the document-level filters: what a vector
    store without access to PostgreSQL (Milvus, Qdrant) is told to restrict its query to."""
    conds, params = document_conditions(filters)
    query = sql.SQL("SELECT d.id FROM documents d WHERE d.knowledge_base_id = %(kb)s AND {}{}").format(
        searchable_document(), sql.SQL("").join(sql.SQL(" AND ") + c for c in conds))
    rows = await db.fetchall(query, {"kb": knowledge_base_id, **params})
    return [r["id"] for r in rows]

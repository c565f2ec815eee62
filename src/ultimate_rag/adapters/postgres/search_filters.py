"""SPEC §10's search filters as a SQL condition on a row's ``document_id`` and ``chunk_id`` columns,
so they restrict *inside* the vector query (HNSW with iterative scan, or the exact fallback) and in
the double filter alike. Values travel as parameters; only column names are composed."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from ...domain.metadata_filter import RANGE, AllOf, AnyOf, Condition, MetadataFilter, Op
from ...domain.search import SearchFilters, glob_to_regex
from .sql import load_queries

Q = load_queries("search_filters.sql")
# (filter attribute, fragment, how the value travels)
_DOCUMENT_FILTERS: tuple[tuple[str, Callable[[Any], Any] | None], ...] = (
    ("document_ids", list), ("filename", glob_to_regex), ("mime_types", list), ("created_after", None),
    ("created_before", None), ("updated_after", None), ("updated_before", None), ("connector_id", None))


def _fragment(name: str, **parts: sql.Composable) -> sql.Composable:
    return sql.SQL(Q[name]).format(**parts)


def searchable_document(alias: str = "d") -> sql.Composable:
    """SPEC §4 rule 3, the searchable rule, in one place: a document is searchable while it has a
    published revision (the last one that reached READY; NULL once deleted or OUTDATED)..."""
    return _fragment("searchable_document", document=sql.Identifier(alias))


def searchable_chunk(chunk: str = "c", document: str = "d") -> sql.Composable:
    """... and of that document only the chunks of its published revision are (never a half-built
    revision, even if a crashed worker left its vectors behind)."""
    return _fragment("searchable_chunk", chunk=sql.Identifier(chunk), document=sql.Identifier(document))


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def document_conditions(filters: SearchFilters, alias: str = "d") -> tuple[list[sql.Composable], dict[str, Any]]:
    """Conditions on the documents table (aliased ``alias``) for the document-level filters."""
    conds: list[sql.Composable] = []
    params: dict[str, Any] = {}
    for name, convert in _DOCUMENT_FILTERS:
        value = getattr(filters, name)
        if value is not None:
            conds.append(_fragment(f"filter_{name}", d=sql.Identifier(alias)))
            params[f"f_{name}"] = convert(value) if convert is not None else value
    if filters.metadata is not None:
        condition, found = metadata_condition(filters.metadata, alias)
        conds.append(_fragment("filter_metadata", condition=condition))
        params |= found
    return conds, params


_COMPARE = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}
_POSITIVE = frozenset({Op.EQ, Op.IN, Op.CONTAINS})


def metadata_condition(tree: MetadataFilter, alias: str = "d") -> tuple[sql.Composable, dict[str, Any]]:
    """``filters.metadata`` (a checked tree, domain/metadata_filter.py) as one condition on the
    documents table: equality, membership and list items as JSON containment (the GIN index answers
    them), ranges typed so that a field of another type never matches. Same rule as ``matches``."""
    params: dict[str, Any] = {}
    document = sql.Identifier(alias)

    def bind(value: Any) -> sql.Placeholder:
        name = f"f_meta_{len(params)}"
        params[name] = value
        return sql.Placeholder(name)

    def walk(node: MetadataFilter) -> sql.Composable:
        if isinstance(node, AllOf | AnyOf):
            joiner = sql.SQL(" AND " if isinstance(node, AllOf) else " OR ")
            return sql.SQL("(") + joiner.join(walk(p) for p in node.parts) + sql.SQL(")")
        return condition(node)

    def condition(node: Condition) -> sql.Composable:
        path = list(node.path)
        if node.op is Op.EXISTS:
            return _fragment("metadata_exists" if node.value else "metadata_missing", d=document, path=bind(path))
        if node.op in RANGE:
            value = node.value if not isinstance(node.value, int | float) else Decimal(str(node.value))
            kind = "metadata_number" if isinstance(value, Decimal) else "metadata_instant"
            return _fragment(kind, d=document, path=bind(path), op=sql.SQL(_COMPARE[node.op]), value=bind(value))
        if node.op is Op.CONTAINS:
            documents = [_nested(path, [node.value])]
        else:
            documents = [_nested(path, v) for v in (node.value if isinstance(node.value, tuple) else (node.value,))]
        positive = node.op in _POSITIVE
        parts = [_fragment("metadata_contains" if positive else "metadata_not_contains", d=document,
                           value=bind(Jsonb(d))) for d in documents]
        return sql.SQL("(") + sql.SQL(" OR " if positive else " AND ").join(parts) + sql.SQL(")")

    return walk(tree), params


def _nested(path: list[str], value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for the path ``a.b``: what a document containing it has there."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return dict(out)


def heading_condition(filters: SearchFilters, alias: str = "c") -> tuple[list[sql.Composable], dict[str, Any]]:
    if filters.heading is None:
        return [], {}
    return ([_fragment("filter_heading", c=sql.Identifier(alias))],
            {"f_heading": "%" + like_escape(filters.heading) + "%"})


def chunk_filters(filters: SearchFilters | None, chunk: str = "c",
                  document: str = "d") -> tuple[sql.Composable, dict[str, Any]]:
    """`` AND ...`` (or nothing): the filters on a chunk row joined to its document row."""
    if filters is None:
        return sql.SQL(""), {}
    conds, params = document_conditions(filters, document)
    hconds, hparams = heading_condition(filters, chunk)
    return sql.SQL("").join(sql.SQL(" AND ") + c for c in [*conds, *hconds]), params | hparams


def vector_row_filter(filters: SearchFilters | None, *, kb_param: str = "kb", document_column: str = "document_id",
                      chunk_column: str = "chunk_id") -> tuple[sql.Composable, dict[str, Any]]:
    """`` AND ...`` (or nothing) restricting rows of a vector table to the filters."""
    if filters is None or filters.empty:
        return sql.SQL(""), {}
    parts: list[sql.Composable] = []
    conds, params = document_conditions(filters)
    if conds:
        parts.append(_fragment("vector_rows_of_documents", column=sql.Identifier(document_column),
                               kb=sql.Placeholder(kb_param), conditions=sql.SQL(" AND ").join(conds)))
    hconds, hparams = heading_condition(filters)
    if hconds:
        parts.append(_fragment("vector_rows_of_chunks", column=sql.Identifier(chunk_column),
                               kb=sql.Placeholder(kb_param), condition=hconds[0]))
        params |= hparams
    return sql.SQL(" AND ") + sql.SQL(" AND ").join(parts), params


async def matching_document_ids(db: Any, knowledge_base_id: UUID, filters: SearchFilters) -> list[UUID]:
    """Searchable documents of the knowledge base that pass the document-level filters: what a vector
    store without access to PostgreSQL (Milvus, Qdrant) is told to restrict its query to."""
    conds, params = document_conditions(filters)
    query = _fragment("matching_document_ids", searchable=searchable_document(),
                      conditions=sql.SQL("").join(sql.SQL(" AND ") + c for c in conds))
    rows = await db.fetchall(query, {"kb": knowledge_base_id, **params})
    return [r["id"] for r in rows]

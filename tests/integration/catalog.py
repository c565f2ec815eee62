"""What a database's schema is, read from PostgreSQL's catalog, in a form two databases can be
compared by: relations, columns (type, default, nullability, identity, generation, order), indexes,
constraints, functions, triggers, views, types and extensions of the ``public`` schema. Objects
that belong to an extension (pgvector's types, functions and operators) are left out: the
extension's version stands for them. Also: an empty database to migrate, for any test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import make_conninfo

_NOT_FROM_AN_EXTENSION = "NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.objid = {oid} AND e.deptype = 'e')"
_PUBLIC = "'public'::regnamespace"

QUERIES = {
    "relations": f"""
        SELECT c.relname, c.relkind, c.relpersistence FROM pg_class c
        WHERE c.relnamespace = {_PUBLIC} AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c')
          AND {_NOT_FROM_AN_EXTENSION.format(oid="c.oid")}""",
    "columns": f"""
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated, a.attcollation::regcollation::text,
               row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = {_PUBLIC} AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
          AND a.attnum > 0 AND NOT a.attisdropped AND {_NOT_FROM_AN_EXTENSION.format(oid="c.oid")}""",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "constraints": f"""
        SELECT coalesce(conrelid::regclass::text, ''), coalesce(contypid::regtype::text, ''), conname, contype,
               pg_get_constraintdef(oid), condeferrable, condeferred, convalidated
        FROM pg_constraint WHERE connamespace = {_PUBLIC} AND {_NOT_FROM_AN_EXTENSION.format(oid="oid")}""",
    "functions": f"""
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), p.prokind,
               CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) END
        FROM pg_proc p WHERE p.pronamespace = {_PUBLIC} AND {_NOT_FROM_AN_EXTENSION.format(oid="p.oid")}""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid), tgenabled
        FROM pg_trigger WHERE NOT tgisinternal""",
    "views": f"""
        SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c
        WHERE c.relnamespace = {_PUBLIC} AND c.relkind IN ('v', 'm')""",
    "types": f"""
        SELECT t.typname, t.typtype, pg_catalog.format_type(t.typbasetype, t.typtypmod),
               (SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder) FROM pg_enum WHERE enumtypid = t.oid)
        FROM pg_type t
        WHERE t.typnamespace = {_PUBLIC} AND t.typtype IN ('e', 'd', 'r', 'm')
          AND {_NOT_FROM_AN_EXTENSION.format(oid="t.oid")}""",
    "extensions": "SELECT extname, extversion, extnamespace::regnamespace::text FROM pg_extension",
    "policies": "SELECT tablename, policyname, permissive, cmd, qual, with_check FROM pg_policies",
}


def catalog(url: str) -> dict[str, list[tuple[str, ...]]]:
    """The schema of the database at ``url``: for each kind of object, its rows as sorted strings."""
    with psycopg.connect(url, autocommit=True) as conn:
        return {kind: sorted(tuple("∅" if v is None else str(v) for v in row) for row in conn.execute(sql).fetchall())
                for kind, sql in QUERIES.items()}


def differences(left: dict[str, list[tuple[str, ...]]], right: dict[str, list[tuple[str, ...]]]) -> list[str]:
    """Readable lines for what one catalog has and the other lacks (empty when they are equal)."""
    lines = []
    for kind in QUERIES:
        a, b = set(left[kind]), set(right[kind])
        lines += [f"{kind}: only in the first:  {row}" for row in sorted(a - b)]
        lines += [f"{kind}: only in the second: {row}" for row in sorted(b - a)]
    return lines


@contextmanager
def empty_database(server_url: str) -> Iterator[str]:
    """A new database with nothing in it (not the migrated template), dropped afterwards."""
    name = f"m_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

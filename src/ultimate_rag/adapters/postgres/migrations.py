"""Numbered SQL migrations (``migrations/NNNN_name.sql``), applied once each, in order, under an
advisory lock so that several processes starting together migrate exactly once."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources

import psycopg

from .sql import load_queries

log = logging.getLogger(__name__)

_ADVISORY_LOCK = 0x756C7472  # "ultr"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    folder = resources.files(__package__) / "migrations"
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration numbers: {versions}")
    return found


def migrate(url: str) -> list[int]:
    """Apply pending migrations; returns the versions applied now."""
    applied_now: list[int] = []
    q = load_queries("migrations.sql")
    lock = {"lock": _ADVISORY_LOCK}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(q["lock"], lock)
        try:
            conn.execute(q["create_schema_migrations"])
            done = {r[0] for r in conn.execute(q["applied_versions"]).fetchall()}
            for migration in available_migrations():
                if migration.version in done:
                    continue
                with conn.transaction():
                    conn.execute(migration.sql.encode())
                    conn.execute(q["record_migration"], {"version": migration.version, "name": migration.name})
                log.info("applied migration %04d_%s", migration.version, migration.name)
                applied_now.append(migration.version)
        finally:
            conn.execute(q["unlock"], lock)
    return applied_now


def current_version(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            row = conn.execute(load_queries("migrations.sql")["current_version"]).fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
        return int(row[0] or 0) if row else 0

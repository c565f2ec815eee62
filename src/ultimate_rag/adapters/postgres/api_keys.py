"""API keys, stored only as hashes; the prefix names a key in logs and lists without revealing it."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from ...domain.auth import Principal, Role, generate_key, hash_key, key_prefix, same_secret
from ...domain.errors import DatabaseError, ResourceNotFoundError, UnstorableValueError
from .database import Database
from .errors import caused_by
from .sql import load_queries

CREATE_ATTEMPTS = 5  # a new key whose random prefix is taken gets a fresh one

Q = load_queries("api_keys.sql")


class ApiKeyRepository:
    def __init__(self, db: Database, *, last_used_interval_seconds: float = 60.0) -> None:
        self._db = db
        self._last_used_interval = last_used_interval_seconds

    async def create(self, *, is_admin: bool, scopes: dict[UUID, Role], name: str = "",
                     expires_at: datetime | None = None) -> str:
        """A new key, returned once and never stored."""
        key, _ = await self.create_with_record(is_admin=is_admin, scopes=scopes, name=name, expires_at=expires_at)
        return key

    async def create_with_record(self, *, is_admin: bool, scopes: dict[UUID, Role], name: str = "",
                                 expires_at: datetime | None = None) -> tuple[str, dict[str, Any]]:
        """Returns the key (shown once, never stored) and its public record."""
        scope_rows = Jsonb([{"knowledge_base_id": str(k), "role": r.value} for k, r in scopes.items()])
        for attempt in range(CREATE_ATTEMPTS):
            key, prefix = generate_key()
            try:
                row = await self._db.fetchone(Q["insert_key"], {
                    "id": uuid4(), "prefix": prefix, "key_hash": hash_key(key), "is_admin": is_admin,
                    "scopes": scope_rows, "name": name, "expires_at": expires_at})
            except DatabaseError as exc:  # the prefix is taken (1 in 4 billion per key): draw again
                if not caused_by(exc, UniqueViolation) or attempt == CREATE_ATTEMPTS - 1:
                    raise
                continue
            assert row is not None
            return key, public(row)
        raise AssertionError("unreachable")

    async def list(self) -> list[dict[str, Any]]:
        return [public(r) for r in await self._db.fetchall(Q["list_keys"])]

    async def revoke(self, key_id_or_prefix: str) -> dict[str, Any]:
        ident = _as_uuid(key_id_or_prefix)
        row = await self._db.fetchone(Q["revoke_key"], {"id": ident, "prefix": key_id_or_prefix})
        if row is None:
            raise ResourceNotFoundError("API key not found")
        return public(row)

    async def authenticate(self, key: str) -> Principal | None:
        """Revocation and expiry take effect on the very next request: nothing is cached. The whole
        key is verified before anything is written; ``last_used_at`` then moves at most once per
        interval, so neither a guessed prefix nor a stream of requests writes a row each time."""
        prefix = key_prefix(key)
        if prefix is None:
            return None
        try:
            row = await self._db.fetchone(Q["live_key"], {"interval": self._last_used_interval, "prefix": prefix})
        except UnstorableValueError:  # a key the database cannot even compare (a NUL byte): not a key
            return None
        if row is None or not same_secret(row["key_hash"], hash_key(key)):
            return None
        if not row["recently_used"]:  # the condition again in the UPDATE: concurrent requests write once
            await self._db.execute(Q["touch_key"], {"id": row["id"], "interval": self._last_used_interval})
        scopes = {UUID(s["knowledge_base_id"]): Role(s["role"]) for s in row["scopes"]}
        return Principal(key_prefix=prefix, is_admin=row["is_admin"], scopes=scopes)

    async def is_valid(self, prefix: str) -> bool:
        """Still neither revoked nor expired (a stream re-checks the key it was opened with)."""
        row = await self._db.fetchone(Q["key_is_valid"], {"prefix": prefix})
        return row is not None


def public(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "prefix": row["prefix"], "name": row["name"], "is_admin": row["is_admin"],
            "scopes": row["scopes"], "created_at": row["created_at"], "expires_at": row["expires_at"],
            "revoked_at": row["revoked_at"], "last_used_at": row["last_used_at"]}


def _as_uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except ValueError:
        return None

"""API keys, stored only as hashes; the prefix names a key in logs and lists without revealing it."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from psycopg.types.json import Jsonb

from ...domain.auth import Principal, Role, generate_key, hash_key, key_prefix, same_secret
from ...domain.errors import ResourceNotFoundError
from .database import Database


class ApiKeyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, *, is_admin: bool, scopes: dict[UUID, Role], name: str = "",
                     expires_at: datetime | None = None) -> str:
        """A new key, returned once and never stored."""
        key, _ = await self.create_with_record(is_admin=is_admin, scopes=scopes, name=name, expires_at=expires_at)
        return key

    async def create_with_record(self, *, is_admin: bool, scopes: dict[UUID, Role], name: str = "",
                                 expires_at: datetime | None = None) -> tuple[str, dict[str, Any]]:
        """Returns the key (shown once, never stored) and its public record."""
        key, prefix = generate_key()
        row = await self._db.fetchone(
            "INSERT INTO api_keys (id, prefix, key_hash, is_admin, scopes, name, expires_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING *",
            (uuid4(), prefix, hash_key(key), is_admin,
             Jsonb([{"knowledge_base_id": str(k), "role": r.value} for k, r in scopes.items()]), name, expires_at),
        )
        assert row is not None
        return key, public(row)

    async def list(self) -> list[dict[str, Any]]:
        return [public(r) for r in await self._db.fetchall("SELECT * FROM api_keys ORDER BY created_at, id")]

    async def revoke(self, key_id_or_prefix: str) -> dict[str, Any]:
        ident = _as_uuid(key_id_or_prefix)
        row = await self._db.fetchone(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())"
            " WHERE (id = %s OR prefix = %s) RETURNING *", (ident, key_id_or_prefix))
        if row is None:
            raise ResourceNotFoundError("API key not found")
        return public(row)

    async def authenticate(self, key: str) -> Principal | None:
        """Revocation and expiry take effect on the very next request: nothing is cached."""
        prefix = key_prefix(key)
        if prefix is None:
            return None
        row = await self._db.fetchone(
            "UPDATE api_keys SET last_used_at = now() WHERE prefix = %s AND revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > now()) RETURNING *",
            (prefix,),
        )
        if row is None or not same_secret(row["key_hash"], hash_key(key)):
            return None
        scopes = {UUID(s["knowledge_base_id"]): Role(s["role"]) for s in row["scopes"]}
        return Principal(key_prefix=prefix, is_admin=row["is_admin"], scopes=scopes)


def public(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "prefix": row["prefix"], "name": row["name"], "is_admin": row["is_admin"],
            "scopes": row["scopes"], "created_at": row["created_at"], "expires_at": row["expires_at"],
            "revoked_at": row["revoked_at"], "last_used_at": row["last_used_at"]}


def _as_uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except ValueError:
        return None

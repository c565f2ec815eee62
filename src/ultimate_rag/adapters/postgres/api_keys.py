"""API keys, stored only as hashes."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from psycopg.types.json import Jsonb

from ...domain.auth import Principal, Role, generate_key, hash_key, key_prefix, same_secret
from .database import Database


class ApiKeyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, *, is_admin: bool, scopes: dict[UUID, Role], description: str = "") -> str:
        key, prefix = generate_key()
        await self._db.execute(
            "INSERT INTO api_keys (id, prefix, key_hash, is_admin, scopes, description)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (uuid4(), prefix, hash_key(key), is_admin,
             Jsonb([{"knowledge_base_id": str(k), "role": r.value} for k, r in scopes.items()]), description),
        )
        return key

    async def authenticate(self, key: str) -> Principal | None:
        prefix = key_prefix(key)
        if prefix is None:
            return None
        row: dict[str, Any] | None = await self._db.fetchone(
            "SELECT * FROM api_keys WHERE prefix = %s AND revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > now())",
            (prefix,),
        )
        if row is None or not same_secret(row["key_hash"], hash_key(key)):
            return None
        scopes = {UUID(s["knowledge_base_id"]): Role(s["role"]) for s in row["scopes"]}
        return Principal(key_prefix=prefix, is_admin=row["is_admin"], scopes=scopes)

"""Who is calling, and what they may touch. Keys are either admin or scoped to knowledge bases
with a role; a scoped key never sees another knowledge base's anything (404, not 403)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from uuid import UUID

KEY_PREFIX = "urk"


class Role(StrEnum):
    READER = "reader"
    EDITOR = "editor"


@dataclass(frozen=True)
class Principal:
    key_prefix: str
    is_admin: bool = False
    scopes: dict[UUID, Role] = field(default_factory=dict)

    def can_read(self, knowledge_base_id: UUID) -> bool:
        return self.is_admin or knowledge_base_id in self.scopes

    def can_edit(self, knowledge_base_id: UUID) -> bool:
        return self.is_admin or self.scopes.get(knowledge_base_id) == Role.EDITOR


def generate_key() -> tuple[str, str]:
    """A new key and its public prefix (which names the key in logs without revealing it)."""
    prefix = secrets.token_hex(4)
    return f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}", prefix


def key_prefix(key: str) -> str | None:
    parts = key.split("_", 2)
    if len(parts) == 3 and parts[0] == KEY_PREFIX and len(parts[1]) == 8:
        return parts[1]
    return None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def same_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))

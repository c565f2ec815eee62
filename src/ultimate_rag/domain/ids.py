"""Stable identifiers: a retry of the same content produces the same ids (seed 002 §9)."""

from __future__ import annotations

import hashlib
from uuid import UUID, uuid5

_CHUNK_NS = UUID("6f1d2c9e-3f43-4e7c-9a51-1b7f0c2e8d41")
_ASSET_NS = UUID("0b7c4a5e-52a8-4c1f-8d6e-2f3a9c7b1e60")


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def chunk_id(document_id: UUID, revision: int, ordinal: int, content: str) -> UUID:
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
    return uuid5(_CHUNK_NS, f"{document_id}:{revision}:{ordinal}:{digest}")


def asset_id(document_id: UUID, locator_key: str, revision: int = 1) -> UUID:
    """Per revision (a rebuild stores its assets beside the published revision's, which its
    citations link); revision 1 keeps the ids assets had before revisions existed."""
    name = f"{document_id}:{locator_key}" if revision <= 1 else f"{document_id}:{revision}:{locator_key}"
    return uuid5(_ASSET_NS, name)


def source_object_key(knowledge_base_id: UUID, document_id: UUID, extension: str, revision: int = 1) -> str:
    """System-generated key, never from user input (only a sanitised extension is kept)."""
    ext = extension.lower() if _safe_extension(extension) else ""
    suffix = "" if revision <= 1 else f".r{revision}"
    return f"{knowledge_base_id}/{document_id}/source{suffix}{ext}"


def asset_object_key(knowledge_base_id: UUID, document_id: UUID, asset: UUID, extension: str) -> str:
    ext = extension.lower() if _safe_extension(extension) else ""
    return f"{knowledge_base_id}/{document_id}/assets/{asset}{ext}"


def _safe_extension(ext: str) -> bool:
    return 1 < len(ext) <= 10 and ext.startswith(".") and ext[1:].isascii() and ext[1:].isalnum()

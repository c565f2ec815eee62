"""``submit`` (SPEC §5, seed 002 §3): validate, resolve a parser before storing anything, store the
bytes under a system key, then create document + job (and the upload's audit entry) in one
transaction — or delete the object."""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any
from uuid import uuid4

from ..domain.errors import ConflictError, FileTooLargeError, InvalidRequestError, UnprocessableRequestError
from ..domain.ids import source_object_key
from ..domain.metadata import SOURCE, source_fields, validate
from ..domain.models import Document, DocumentSource, KnowledgeBase
from ..domain.ports import DocumentIntake, ObjectStorage, ParserResolver

log = logging.getLogger(__name__)



def safe_filename(raw: str | None, max_length: int) -> str:
    """Basename only (POSIX and Windows separators), no control characters, bounded length."""
    if raw is None:
        raise InvalidRequestError("the upload has no filename")
    name = PureWindowsPath(PurePosixPath(raw.replace("\x00", "")).name).name.strip()
    if not name or name in (".", ".."):
        raise InvalidRequestError("the filename is empty")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
        raise InvalidRequestError("the filename contains control characters")
    if len(name.encode("utf-8")) > max_length:
        raise InvalidRequestError(f"the filename is longer than {max_length} bytes")
    return name


def safe_path(raw: str, max_length: int = 1024) -> str:
    """A relative path inside the folder a client uploads: ``/``-separated, no ``..``, no control
    characters, bounded length."""
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise UnprocessableRequestError("path must be a relative path without '..' segments")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in raw):
        raise UnprocessableRequestError("path contains control characters")
    path = "/".join(parts)
    if len(path.encode("utf-8")) > max_length:
        raise UnprocessableRequestError(f"path is longer than {max_length} bytes")
    return path


class IngestionService:
    def __init__(self, *, documents: DocumentIntake, storage: ObjectStorage, parsers: ParserResolver,
                 max_upload_bytes: int, max_filename_length: int, max_attempts: int) -> None:
        self._documents = documents
        self._storage = storage
        self._parsers = parsers
        self.max_upload_bytes = max_upload_bytes
        self._max_filename_length = max_filename_length
        self._max_attempts = max_attempts

    async def submit(self, kb: KnowledgeBase, filename: str | None, content_type: str | None, content: bytes, *,
                     uploaded_by: str | None = None, metadata: dict[str, Any] | None = None,
                     path: str | None = None) -> Document:
        """``kb`` as the caller read it (to check access); whether it still exists and is not being
        deleted is checked again by the commit, under its share lock. ``uploaded_by``: the API key
        prefix the upload's audit entry names (written with the document). ``metadata``: the
        document's own fields (422 naming a bad one); ``path``: where the file lies in the folder
        the client uploads (``source.path``, and the metadata's ``source`` fields)."""
        knowledge_base_id = kb.id
        if kb.deleting:
            raise ConflictError("knowledge base is being deleted")
        fields = validate(metadata or {})
        origin: dict[str, Any] = {"kind": "upload"}
        if path is not None:
            origin["path"] = safe_path(path)
            fields[SOURCE] = source_fields(origin["path"])
        name = safe_filename(filename, self._max_filename_length)
        if len(content) > self.max_upload_bytes:
            raise FileTooLargeError(f"the file is larger than the limit of {self.max_upload_bytes} bytes")
        document_id = uuid4()
        source = DocumentSource(document_id, name, content_type or "application/octet-stream", content)
        parser = self._parsers.resolve(source)  # 415 before anything is stored
        mime = self._parsers.mime_type(parser, source)  # an HTML page sent as image/svg+xml is text/html
        key = source_object_key(knowledge_base_id, document_id, source.extension)
        await self._storage.put(key, content, mime)
        try:
            return await self._documents.create_with_job(
                document_id=document_id, knowledge_base_id=knowledge_base_id, filename=name, mime_type=mime,
                size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest(), object_key=key,
                max_attempts=self._max_attempts, uploaded_by=uploaded_by, source=origin, metadata=fields,
            )
        except BaseException:
            try:
                await self._storage.delete(key)  # compensation: no orphan object
            except Exception:
                log.exception("could not remove orphan object %s", key)
            raise

"""Reading the one file of an upload: at most one file part and a few fields (a multipart body with
thousands of parts is refused before they are parsed), a bounded read, and a schema for the docs.
An upload may carry the document's ``metadata`` (a JSON object) and its ``path`` in the folder the
client uploads; a re-upload carries the file alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException

from ..domain.errors import InvalidRequestError
from ..domain.metadata import MetadataError
from .deps import SettingsDep

_FILE = {"file": {"type": "string", "format": "binary", "description": "the document"}}
CONTENT_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"], "properties": _FILE}}}}}
UPLOAD_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"], "properties": {
        **_FILE,
        "metadata": {"type": "string", "description": "the document's own fields: a JSON object "
                                                      "(docs/metadata.md)"},
        "path": {"type": "string", "description": "where the file lies in the folder being uploaded "
                                                  "(relative, '/'-separated): source.path"},
    }}}}}}


@dataclass(frozen=True)
class Upload:
    file: UploadFile
    metadata: dict[str, Any] | None = None
    path: str | None = None


async def _form(request: Request, settings: SettingsDep) -> tuple[FormData, UploadFile]:
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise InvalidRequestError("send the file as multipart/form-data in a field named 'file'")
    try:
        form = await request.form(max_files=1, max_fields=settings.max_multipart_fields,
                                  max_part_size=64 * 1024)
    except MultiPartException as exc:
        raise InvalidRequestError(f"invalid multipart body: {exc.message}") from exc
    file = form.get("file")
    if not isinstance(file, UploadFile):
        raise InvalidRequestError("the multipart body has no file in a field named 'file'")
    return form, file


async def uploaded_file(request: Request, settings: SettingsDep) -> UploadFile:
    form, file = await _form(request, settings)
    if form.get("metadata") is not None:
        raise MetadataError("metadata: a re-upload keeps the document's metadata; change it with "
                            "PATCH /api/documents/{id}")
    return file


async def upload(request: Request, settings: SettingsDep) -> Upload:
    form, file = await _form(request, settings)
    raw, path = form.get("metadata"), form.get("path")
    if isinstance(raw, UploadFile) or isinstance(path, UploadFile):
        raise InvalidRequestError("metadata and path are plain form fields, not files")
    metadata = None
    if raw is not None and raw.strip():
        try:
            metadata = json.loads(raw)
        except ValueError as exc:
            raise MetadataError(f"metadata: not valid JSON ({exc})") from exc
    return Upload(file, metadata, path or None)


UploadedFile = Annotated[UploadFile, Depends(uploaded_file)]
UploadDep = Annotated[Upload, Depends(upload)]

"""Reading the one file of an upload: at most one file part and a few fields (a multipart body with
thousands of parts is refused before they are parsed), a bounded read, and a schema for the docs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException

from ..domain.errors import InvalidRequestError
from .deps import SettingsDep

UPLOAD_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary", "description": "the document"}},
}}}}}


async def uploaded_file(request: Request, settings: SettingsDep) -> UploadFile:
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
    return file


UploadedFile = Annotated[UploadFile, Depends(uploaded_file)]

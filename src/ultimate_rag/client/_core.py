"""What the sync and async clients share: the calls (method, path, body, how to read the answer),
the retry policy, upload bodies with progress, and the server-sent-events reader."""

from __future__ import annotations

import email.utils
import json
import mimetypes
import os
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx

from .errors import ApiError, error_for
from .models import (
    STABLE_STATUSES,
    Answer,
    Chunk,
    Document,
    EmbeddingMigration,
    KnowledgeBase,
    Page,
    ReindexResult,
    SearchResults,
)

T = TypeVar("T")
Id = str | UUID
ProgressCallback = Callable[[int, int], None]  # (bytes sent so far, total bytes)
DEFAULT_URL = "http://127.0.0.1:8000"
RETRY_STATUSES = frozenset({429, 503})
# an answer is read whole when the model is done: the server may wait minutes for a local model
# (its provider timeout, 300 s for a local endpoint, and a rewrite call), so the client waits
# longer than the server would, and the server's own 504 with its reason arrives instead of a
# client-side timeout
ANSWER_TIMEOUT_SECONDS = 900.0


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on 429 and 503 (honouring ``Retry-After``) and on connections that could not be made;
    exponential backoff with jitter otherwise."""

    retries: int = 5
    backoff_seconds: float = 0.5
    max_delay_seconds: float = 60.0

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        if response is not None:
            after = retry_after_seconds(response.headers.get("retry-after"))
            if after is not None:
                return min(after, self.max_delay_seconds)
        base = self.backoff_seconds * (2.0 ** attempt)
        return min(base * (0.5 + random.random() / 2), self.max_delay_seconds)


def http_options(url: str, key: str | None, timeout: float) -> dict[str, Any]:
    """The ``httpx`` client settings of both clients: base URL, bearer key, timeouts."""
    return {"base_url": url.rstrip("/"), "headers": {"Authorization": f"Bearer {key}"} if key else {},
            "timeout": httpx.Timeout(timeout, connect=10.0)}


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass
class Upload:
    """A file to send: bytes, a path, or an open binary file; ``progress(sent, total)`` is called as
    the body goes out (again from zero if a retry sends it again)."""

    filename: str
    source: bytes | str | os.PathLike[str] | IO[bytes]
    content_type: str | None = None
    progress: ProgressCallback | None = None
    metadata: dict[str, Any] | None = None  # the document's own fields (docs/metadata.md)
    path: str | None = None  # where the file lies in the folder being uploaded (source.path)

    def fields(self) -> dict[str, str]:
        """The upload's form fields beside the file."""
        out = {"metadata": json.dumps(self.metadata)} if self.metadata else {}
        return out | ({"path": self.path} if self.path else {})

    def open(self) -> tuple[IO[bytes], int, bool]:
        """The stream to read, its size, and whether we opened it (and must close it)."""
        import io

        src = self.source
        if isinstance(src, bytes | bytearray):
            return io.BytesIO(bytes(src)), len(src), True
        if isinstance(src, str | os.PathLike):
            fh = open(src, "rb")
            return fh, os.fstat(fh.fileno()).st_size, True
        pos = src.tell()
        size = src.seek(0, os.SEEK_END) - pos
        src.seek(pos)
        return src, size, False

    def files(self, stream: IO[bytes], size: int) -> dict[str, Any]:
        reader = ProgressReader(stream, size, self.progress) if self.progress else stream
        mime = self.content_type or mimetypes.guess_type(self.filename)[0] or "application/octet-stream"
        return {"file": (self.filename, reader, mime)}


def make_upload(file: Any, filename: str | None, content_type: str | None, progress: ProgressCallback | None,
                metadata: dict[str, Any] | None = None, path: str | None = None) -> Upload:
    if filename is None:
        if isinstance(file, str | os.PathLike):
            filename = os.path.basename(os.fspath(file))
        else:
            filename = os.path.basename(str(getattr(file, "name", "") or "")) or "upload.bin"
    return Upload(filename=filename, source=file, content_type=content_type, progress=progress, metadata=metadata,
                  path=path)


class ProgressReader:
    """A file wrapper that reports how far the multipart encoder has read."""

    def __init__(self, stream: IO[bytes], total: int, callback: ProgressCallback) -> None:
        self._stream = stream
        self._start = stream.tell()
        self._total = total
        self._callback = callback
        self._sent = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._sent += len(data)
        self._callback(min(self._sent, self._total), self._total)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        pos = self._stream.seek(offset, whence)
        self._sent = max(0, pos - self._start)
        return pos

    def tell(self) -> int:
        return self._stream.tell()

    @property
    def name(self) -> str:
        return str(getattr(self._stream, "name", "file"))


@dataclass
class Call(Generic[T]):
    """One API request and how its answer becomes a typed result."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] | None = None
    json: Any = None
    upload: Upload | None = None
    idempotent: bool = field(default=False)
    timeout: float | None = None  # the read timeout of this call, when not the client's


def segment(value: Id) -> str:
    """One URL path segment: every character that could end or climb the path (``/``, ``?``,
    ``#``, ``%``, a ``.`` or ``..`` segment) is escaped, so an argument names a resource and never
    another route (``get_document("../../mcp")`` asks for a document of that name: a 422)."""
    text = quote(str(value), safe="")
    return text.replace(".", "%2E") if text.strip(".") == "" else text


def _list(parse: Callable[[dict[str, Any]], T]) -> Callable[[Any], Page[T]]:
    return lambda d: Page(items=[parse(i) for i in d.get("items") or []], next_cursor=d.get("next_cursor"),
                          counts=d.get("counts") or {})


def _params(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


class Calls:
    """Every endpoint the clients know, as data (SPEC §11)."""

    @staticmethod
    def list_knowledge_bases() -> Call[list[KnowledgeBase]]:
        return Call("GET", "/api/knowledge-bases",
                    lambda d: [KnowledgeBase.from_json(i) for i in d.get("items") or []], idempotent=True)

    @staticmethod
    def get_knowledge_base(kb: Id) -> Call[KnowledgeBase]:
        return Call("GET", f"/api/knowledge-bases/{segment(kb)}", KnowledgeBase.from_json, idempotent=True)

    @staticmethod
    def create_knowledge_base(name: str, description: str, settings: dict[str, Any] | None) -> Call[KnowledgeBase]:
        body = _params(name=name, description=description, settings=settings)
        return Call("POST", "/api/knowledge-bases", KnowledgeBase.from_json, json=body)

    @staticmethod
    def list_documents(kb: Id, status: str | None, limit: int | None, cursor: str | None,
                       filename_contains: str | None = None) -> Call[Page[Document]]:
        return Call("GET", f"/api/knowledge-bases/{segment(kb)}/documents", _list(Document.from_json),
                    params=_params(status=status, limit=limit, cursor=cursor, q=filename_contains), idempotent=True)

    @staticmethod
    def get_document(document_id: Id) -> Call[Document]:
        return Call("GET", f"/api/documents/{segment(document_id)}", Document.from_json, idempotent=True)

    @staticmethod
    def list_chunks(document_id: Id, limit: int | None, cursor: str | None) -> Call[Page[Chunk]]:
        return Call("GET", f"/api/documents/{segment(document_id)}/chunks", _list(Chunk.from_json),
                    params=_params(limit=limit, cursor=cursor), idempotent=True)

    @staticmethod
    def upload(kb: Id, upload: Upload) -> Call[Document]:
        return Call("POST", f"/api/knowledge-bases/{segment(kb)}/documents", Document.from_json, upload=upload)

    @staticmethod
    def update_metadata(document_id: Id, metadata: dict[str, Any]) -> Call[Document]:
        return Call("PATCH", f"/api/documents/{document_id}", Document.from_json, json={"metadata": metadata})

    @staticmethod
    def replace_content(document_id: Id, upload: Upload) -> Call[Document]:
        return Call("PUT", f"/api/documents/{segment(document_id)}/content", Document.from_json, upload=upload)

    @staticmethod
    def reindex_document(document_id: Id) -> Call[Document]:
        return Call("POST", f"/api/documents/{segment(document_id)}/reindex", Document.from_json)

    @staticmethod
    def reindex_knowledge_base(kb: Id, which: str | None) -> Call[ReindexResult]:
        return Call("POST", f"/api/knowledge-bases/{segment(kb)}/reindex",
                    lambda d: ReindexResult(queued=d["queued"], skipped_active=d["skipped_active"]),
                    json={"filter": which} if which else None)

    @staticmethod
    def migrate_embedding(kb: Id, embedder: str, model: str | None,
                          dimension: int | None) -> Call[EmbeddingMigration | None]:
        return Call("POST", f"/api/knowledge-bases/{segment(kb)}/embedding-migration", EmbeddingMigration.from_json,
                    json=_params(embedder=embedder, model=model, dimension=dimension))

    @staticmethod
    def embedding_migration(kb: Id) -> Call[EmbeddingMigration | None]:
        return Call("GET", f"/api/knowledge-bases/{segment(kb)}/embedding-migration", EmbeddingMigration.from_json,
                    idempotent=True)

    @staticmethod
    def abort_embedding_migration(kb: Id) -> Call[EmbeddingMigration | None]:
        return Call("DELETE", f"/api/knowledge-bases/{segment(kb)}/embedding-migration", EmbeddingMigration.from_json)

    @staticmethod
    def delete_document(document_id: Id, force: bool) -> Call[Document]:
        return Call("DELETE", f"/api/documents/{segment(document_id)}", Document.from_json,
                    params={"force": "true" if force else "false"})

    @staticmethod
    def search(kb: Id, query: str, top_k: int, mode: str | None, filters: dict[str, Any] | None,
               min_score: float | None) -> Call[SearchResults]:
        body = _params(query=query, top_k=top_k, mode=mode, filters=filters or None, min_score=min_score)
        return Call("POST", f"/api/knowledge-bases/{segment(kb)}/search", SearchResults.from_json, json=body,
                    idempotent=True)

    @staticmethod
    def answer(kb: Id, question: str, top_k: int | None, filters: dict[str, Any] | None,
               messages: list[dict[str, str]] | None) -> Call[Answer]:
        body = _params(question=question, top_k=top_k, filters=filters or None, messages=messages or None)
        # not retried when the connection breaks or times out: that would ask the model all over again
        return Call("POST", f"/api/knowledge-bases/{segment(kb)}/answer", Answer.from_json, json=body,
                    timeout=ANSWER_TIMEOUT_SECONDS)

    @staticmethod
    def stuck_documents(older_than_seconds: float | None) -> Call[list[dict[str, Any]]]:
        return Call("GET", "/api/documents/stuck", lambda d: list(d.get("items") or []),
                    params=_params(older_than_seconds=older_than_seconds), idempotent=True)


def read_answer(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer; an ApiError with the server's message otherwise."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    if response.is_success:
        return body
    raise error_for(response.status_code, body, response.text)


def not_found_route(exc: ApiError) -> bool:
    """A 404 from the router itself (the server has no such endpoint), not a missing resource."""
    return exc.status_code == 404 and exc.detail == "Not Found"


def is_stable(status: str) -> bool:
    return status in STABLE_STATUSES


@dataclass
class SseEvent:
    event: str
    data: Any


class SseReader:
    """Server-sent events from lines: ``feed`` returns an event when a blank line ends one."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data and self._event == "message":
                return None
            raw = "\n".join(self._data)
            event, self._event, self._data = self._event, "message", []
            try:
                data = json.loads(raw) if raw else {}
            except ValueError:
                data = raw
            return SseEvent(event, data)
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None


def pending_of(docs: dict[str, Document], ids: Iterable[str]) -> list[str]:
    return [i for i in ids if not docs[i].is_stable]

"""The asynchronous client (httpx.AsyncClient). Same methods as :class:`ultimate_rag.client.Client`,
awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

import httpx

from ._core import (
    DEFAULT_URL,
    RETRY_STATUSES,
    Call,
    Calls,
    Id,
    ProgressCallback,
    RetryPolicy,
    SseReader,
    make_upload,
    pending_of,
    read_answer,
)
from .errors import ApiError, NotFound, TransportError
from .models import Answer, Chunk, Document, EmbeddingMigration, KnowledgeBase, Page, ReindexResult, SearchHit

T = TypeVar("T")
LIST_ABOVE = 20  # refresh more documents than this with the list endpoint


class AsyncClient:
    """``async with AsyncClient(url, key) as rag: hits = await rag.search(kb_id, "query")``"""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, *, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, http: httpx.AsyncClient | None = None) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = http or httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers,
                                               timeout=httpx.Timeout(timeout, connect=10.0))
        self._owned = http is None
        self.retry = retry or RetryPolicy()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            stream = None
            try:
                kwargs: dict[str, Any] = {"params": call.params}
                if call.json is not None:
                    kwargs["json"] = call.json
                if call.upload is not None:
                    stream, size, owned = call.upload.open()
                    kwargs["files"] = call.upload.files(stream, size)
                try:
                    response = await self._http.request(call.method, call.path, **kwargs)
                finally:
                    if stream is not None and owned:
                        stream.close()
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                response = None
                if attempt >= self.retry.retries:
                    raise TransportError(f"cannot reach the server: {exc}") from exc
            except httpx.TransportError as exc:
                if not call.idempotent or attempt >= self.retry.retries:
                    raise TransportError(f"the connection failed: {exc}") from exc
                response = None
            if response is not None and (response.status_code not in RETRY_STATUSES
                                         or attempt >= self.retry.retries):
                return call.parse(read_answer(response))
            await asyncio.sleep(self.retry.delay(attempt, response))
            attempt += 1

    # knowledge bases
    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        return await self._send(Calls.list_knowledge_bases())

    async def get_knowledge_base(self, kb_id: Id) -> KnowledgeBase:
        return await self._send(Calls.get_knowledge_base(kb_id))

    async def create_knowledge_base(self, name: str, description: str = "",
                                    settings: dict[str, Any] | None = None) -> KnowledgeBase:
        return await self._send(Calls.create_knowledge_base(name, description, settings))

    async def find_knowledge_base(self, name_or_id: str) -> KnowledgeBase:
        """A knowledge base by id or exact name; NotFound if this key sees none."""
        for kb in await self.list_knowledge_bases():
            if name_or_id in (kb.id, kb.name):
                return kb
        raise NotFound(404, f"no knowledge base named or with id {name_or_id!r} is visible to this key")

    async def reindex_knowledge_base(self, kb_id: Id, which: str | None = None) -> ReindexResult:
        return await self._send(Calls.reindex_knowledge_base(kb_id, which))

    async def migrate_embedding(self, kb_id: Id, embedder: str, model: str | None = None,
                          dimension: int | None = None) -> EmbeddingMigration | None:
        """Start moving the knowledge base to another embedding model (``local`` or ``openai``)."""
        return await self._send(Calls.migrate_embedding(kb_id, embedder, model, dimension))

    async def embedding_migration(self, kb_id: Id) -> EmbeddingMigration | None:
        return await self._send(Calls.embedding_migration(kb_id))

    async def abort_embedding_migration(self, kb_id: Id) -> EmbeddingMigration | None:
        return await self._send(Calls.abort_embedding_migration(kb_id))

    # documents
    async def list_documents(self, kb_id: Id, *, status: str | None = None, limit: int | None = None,
                             cursor: str | None = None, filename_contains: str | None = None) -> Page[Document]:
        return await self._send(Calls.list_documents(kb_id, status, limit, cursor, filename_contains))

    async def iter_documents(self, kb_id: Id, *, status: str | None = None,
                             page_size: int = 200) -> AsyncIterator[Document]:
        cursor = None
        while True:
            page = await self.list_documents(kb_id, status=status, limit=page_size, cursor=cursor)
            for doc in page.items:
                yield doc
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get_document(self, document_id: Id) -> Document:
        return await self._send(Calls.get_document(document_id))

    async def upload(self, kb_id: Id, file: Any, *, filename: str | None = None, content_type: str | None = None,
                     progress: ProgressCallback | None = None) -> Document:
        """Upload bytes, a path or an open binary file; ``progress(sent, total)`` as it goes out."""
        return await self._send(Calls.upload(kb_id, make_upload(file, filename, content_type, progress)))

    async def replace_content(self, document_id: Id, file: Any, *, filename: str | None = None,
                              content_type: str | None = None, progress: ProgressCallback | None = None) -> Document:
        """New bytes for an existing document (409 while it is being processed)."""
        return await self._send(Calls.replace_content(document_id, make_upload(file, filename, content_type, progress)))

    async def reindex_document(self, document_id: Id) -> Document:
        return await self._send(Calls.reindex_document(document_id))

    async def delete_document(self, document_id: Id, *, force: bool = False) -> Document:
        return await self._send(Calls.delete_document(document_id, force))

    async def list_chunks(self, document_id: Id, *, limit: int | None = None,
                          cursor: str | None = None) -> Page[Chunk]:
        return await self._send(Calls.list_chunks(document_id, limit, cursor))

    async def iter_chunks(self, document_id: Id, *, page_size: int = 100) -> AsyncIterator[Chunk]:
        cursor = None
        while True:
            page = await self.list_chunks(document_id, limit=page_size, cursor=cursor)
            for chunk in page.items:
                yield chunk
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def stuck_documents(self, older_than_seconds: float | None = None) -> list[dict[str, Any]]:
        return await self._send(Calls.stuck_documents(older_than_seconds))

    # search and answers
    async def search(self, kb_id: Id, query: str, *, top_k: int = 10, mode: str | None = None,
                     filters: dict[str, Any] | None = None, min_score: float | None = None) -> list[SearchHit]:
        return await self._send(Calls.search(kb_id, query, top_k, mode, filters, min_score))

    async def answer(self, kb_id: Id, question: str, *, top_k: int | None = None,
                     filters: dict[str, Any] | None = None,
                     messages: list[dict[str, str]] | None = None) -> Answer:
        return await self._send(Calls.answer(kb_id, question, top_k, filters, messages))

    async def metrics_text(self) -> str:
        response = await self._http.get("/metrics")
        if not response.is_success:
            read_answer(response)
        return response.text

    # waiting
    async def wait_until_ready(self, document_ids: Iterable[Id], *, timeout: float = 600.0,
                               poll_interval: float = 2.0,
                               on_update: Callable[[Document], None] | None = None) -> list[Document]:
        """Wait until every document is stable (READY, FAILED, DELETED or OUTDATED) and return them, in
        order. Follows the knowledge base's event stream; polls when the server has none."""
        ids = [str(i) for i in document_ids]
        deadline = time.monotonic() + timeout
        docs: dict[str, Document] = {}
        for i in ids:
            docs[i] = await self._fresh(i)
            if on_update:
                on_update(docs[i])
        streaming = True
        while pending := pending_of(docs, ids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} document(s) not ready after {timeout:g}s")
            kb = docs[pending[0]].knowledge_base_id
            group = [i for i in pending if docs[i].knowledge_base_id == kb]
            try:
                streaming = streaming and await self._follow(kb, group, docs, deadline, on_update)
            except (ApiError, TransportError, httpx.HTTPError):
                streaming = False
            if not streaming:  # no event stream (or it broke): poll from now on
                await asyncio.sleep(max(0.0, min(poll_interval, deadline - time.monotonic())))
                await self._refresh(group, docs, on_update)
        return [docs[i] for i in ids]

    async def _fresh(self, document_id: str, previous: Document | None = None) -> Document:
        try:
            return await self.get_document(document_id)
        except NotFound:
            if previous is None:
                raise
            return replace(previous, status="DELETED")  # removed for good while we waited

    async def _refresh(self, ids: list[str], docs: dict[str, Document],
                       on_update: Callable[[Document], None] | None) -> None:
        if len(ids) > LIST_ABOVE:  # one listing (pages of 500) rather than a request per document
            wanted, found = set(ids), {}
            async for d in self.iter_documents(docs[ids[0]].knowledge_base_id, page_size=500):
                if d.id in wanted:
                    found[d.id] = d
            fresh = [found.get(i) or replace(docs[i], status="DELETED") for i in ids]
        else:
            fresh = [await self._fresh(i, docs[i]) for i in ids]
        for doc in fresh:
            if on_update and doc.status != docs[doc.id].status:
                on_update(doc)
            docs[doc.id] = doc

    async def _follow(self, kb: str, group: list[str], docs: dict[str, Document], deadline: float,
                      on_update: Callable[[Document], None] | None) -> bool:
        """Read one event stream; False when the server says to poll instead."""
        wanted = set(group)
        seconds = max(1, min(25, int(deadline - time.monotonic()) + 1))
        async with self._http.stream("GET", f"/api/knowledge-bases/{kb}/events",
                                     params={"max_seconds": seconds}) as response:
            if not response.is_success:
                await response.aread()
                read_answer(response)
            reader = SseReader()
            async for line in response.aiter_lines():
                event = reader.feed(line)
                if event is None:
                    continue
                if event.event == "fallback":
                    return False
                if event.event == "ready":  # subscribed: catch up on what changed before
                    await self._refresh(sorted(wanted), docs, on_update)
                elif event.event == "document" and isinstance(event.data, dict) and event.data.get("id") in wanted:
                    await self._refresh([event.data["id"]], docs, on_update)
                elif event.event in ("resync", "reconnect"):
                    await self._refresh(sorted(wanted), docs, on_update)
                    return True
                wanted = {i for i in wanted if not docs[i].is_stable}
                if not wanted:
                    return True
        return True


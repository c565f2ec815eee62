"""The asynchronous client (httpx.AsyncClient). Same methods as :class:`ultimate_rag.client.Client`,
awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import httpx

from . import _flows as flows
from . import _waiting as waiting
from ._core import DEFAULT_URL, Call, Calls, Id, ProgressCallback, RetryPolicy, http_options, make_upload, read_answer
from ._waiting import LIST_ABOVE as LIST_ABOVE  # re-exported: refresh more documents than this with one listing
from .models import Answer, Chunk, Document, EmbeddingMigration, KnowledgeBase, Page, ReindexResult, SearchResults

T = TypeVar("T")


class AsyncClient:
    """``async with AsyncClient(url, key) as rag: hits = await rag.search(kb_id, "query")``"""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, *, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, http: httpx.AsyncClient | None = None) -> None:
        self._http = http or httpx.AsyncClient(**http_options(url, key, timeout))
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
        return await self._run(flows.send(call, self.retry))

    async def _run(self, flow: flows.Flow[T]) -> T:
        async with AsyncExitStack() as events:  # the event stream a flow opens, closed at the latest here
            lines: AsyncIterator[str] | None = None

            async def perform(effect: flows.Effect) -> Any:
                nonlocal lines
                if isinstance(effect, flows.Request):
                    with flows.request_kwargs(effect.call) as kwargs:
                        return await self._http.request(effect.call.method, effect.call.path, **kwargs)
                if isinstance(effect, flows.Sleep):
                    await asyncio.sleep(effect.seconds)
                elif isinstance(effect, flows.OpenEvents):
                    response = await events.enter_async_context(
                        self._http.stream("GET", effect.path, params=effect.params))
                    if not response.is_success:
                        await response.aread()
                        read_answer(response)
                    lines = response.aiter_lines()
                elif isinstance(effect, flows.NextLine):
                    return await anext(lines, None) if lines is not None else None
                else:
                    await events.aclose()
                return None

            return await flows.arun(flow, perform)

    async def _iterate(self, call_for: Callable[[str | None], Call[Page[T]]]) -> AsyncIterator[T]:
        cursor = None
        while True:
            page = await self._send(call_for(cursor))
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

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
        return flows.find_knowledge_base(await self.list_knowledge_bases(), name_or_id)

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

    def iter_documents(self, kb_id: Id, *, status: str | None = None,
                       page_size: int = 200) -> AsyncIterator[Document]:
        return self._iterate(lambda cursor: Calls.list_documents(kb_id, status, page_size, cursor, None))

    async def get_document(self, document_id: Id) -> Document:
        return await self._send(Calls.get_document(document_id))

    async def upload(self, kb_id: Id, file: Any, *, filename: str | None = None, content_type: str | None = None,
                     progress: ProgressCallback | None = None, metadata: dict[str, Any] | None = None,
                     path: str | None = None) -> Document:
        """Upload bytes, a path or an open binary file; ``progress(sent, total)`` as it goes out;
        ``metadata``: the document's own fields; ``path``: where it lies in the folder being uploaded."""
        return await self._send(Calls.upload(kb_id, make_upload(file, filename, content_type, progress, metadata,
                                                               path)))

    async def update_metadata(self, document_id: Id, metadata: dict[str, Any]) -> Document:
        """Change the document's own fields (a JSON Merge Patch: a key set to None goes). Nothing is
        rebuilt; search sees the new values at once."""
        return await self._send(Calls.update_metadata(document_id, metadata))

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

    def iter_chunks(self, document_id: Id, *, page_size: int = 100) -> AsyncIterator[Chunk]:
        return self._iterate(lambda cursor: Calls.list_chunks(document_id, page_size, cursor))

    async def stuck_documents(self, older_than_seconds: float | None = None) -> list[dict[str, Any]]:
        return await self._send(Calls.stuck_documents(older_than_seconds))

    # search and answers
    async def search(self, kb_id: Id, query: str, *, top_k: int = 10, mode: str | None = None,
                     filters: dict[str, Any] | None = None, min_score: float | None = None) -> SearchResults:
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
                               poll_interval: float = 2.0, on_update: Callable[[Document], None] | None = None,
                               idle_timeout: float | None = None,
                               on_connection: Callable[[str | None], None] | None = None) -> list[Document]:
        """Wait until every document is stable (READY, FAILED, DELETED or OUTDATED) and return them, in
        order. Follows the knowledge base's event stream; polls when the server has none.

        ``on_update(doc)``: each document when first read and whenever it changes (status, progress,
        error). A server that restarts or cannot be reached is waited for (reconnecting with backoff);
        ``on_connection(why)`` says when it cannot be reached, ``on_connection(None)`` when it is back.
        ``TimeoutError`` after ``timeout`` seconds in all, or ``idle_timeout`` seconds in which no
        document changed."""
        return await self._run(waiting.wait_until_ready(document_ids, self.retry, timeout, poll_interval, on_update,
                                                       idle_timeout, on_connection))

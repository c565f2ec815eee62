"""The synchronous client (httpx.Client). :mod:`.aio` has the same methods, awaited; keep the two in step."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import Any, TypeVar

import httpx

from . import _flows as flows
from . import _waiting as waiting
from ._core import DEFAULT_URL, Call, Calls, Id, ProgressCallback, RetryPolicy, http_options, make_upload, read_answer
from .models import Answer, Chunk, Document, EmbeddingMigration, KnowledgeBase, Page, ReindexResult, SearchResults

T = TypeVar("T")


class Client:
    """``with Client(url, key) as rag: hits = rag.search(kb_id, "query")``"""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, *, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, http: httpx.Client | None = None) -> None:
        self._http = http or httpx.Client(**http_options(url, key, timeout))
        self._owned = http is None
        self.retry = retry or RetryPolicy()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def _send(self, call: Call[T]) -> T:
        return self._run(flows.send(call, self.retry))

    def _run(self, flow: flows.Flow[T]) -> T:
        with ExitStack() as events:  # the event stream a flow opens, closed at the latest here
            lines: Iterator[str] = iter(())

            def perform(effect: flows.Effect) -> Any:
                nonlocal lines
                if isinstance(effect, flows.Request):
                    with flows.request_kwargs(effect.call) as kwargs:
                        return self._http.request(effect.call.method, effect.call.path, **kwargs)
                if isinstance(effect, flows.Sleep):
                    time.sleep(effect.seconds)
                elif isinstance(effect, flows.OpenEvents):
                    response = events.enter_context(self._http.stream("GET", effect.path, params=effect.params))
                    if not response.is_success:
                        response.read()
                        read_answer(response)
                    lines = response.iter_lines()
                elif isinstance(effect, flows.NextLine):
                    return next(lines, None)
                else:
                    events.close()
                return None

            return flows.run(flow, perform)

    def _iterate(self, call_for: Callable[[str | None], Call[Page[T]]]) -> Iterator[T]:
        cursor = None
        while True:
            page = self._send(call_for(cursor))
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # knowledge bases
    def list_knowledge_bases(self) -> list[KnowledgeBase]:
        return self._send(Calls.list_knowledge_bases())

    def get_knowledge_base(self, kb_id: Id) -> KnowledgeBase:
        return self._send(Calls.get_knowledge_base(kb_id))

    def create_knowledge_base(self, name: str, description: str = "",
                                    settings: dict[str, Any] | None = None) -> KnowledgeBase:
        return self._send(Calls.create_knowledge_base(name, description, settings))

    def find_knowledge_base(self, name_or_id: str) -> KnowledgeBase:
        """A knowledge base by id or exact name; NotFound if this key sees none."""
        return flows.find_knowledge_base(self.list_knowledge_bases(), name_or_id)

    def reindex_knowledge_base(self, kb_id: Id, which: str | None = None) -> ReindexResult:
        return self._send(Calls.reindex_knowledge_base(kb_id, which))

    def migrate_embedding(self, kb_id: Id, embedder: str, model: str | None = None,
                          dimension: int | None = None) -> EmbeddingMigration | None:
        """Start moving the knowledge base to another embedding model (``local`` or ``openai``)."""
        return self._send(Calls.migrate_embedding(kb_id, embedder, model, dimension))

    def embedding_migration(self, kb_id: Id) -> EmbeddingMigration | None:
        return self._send(Calls.embedding_migration(kb_id))

    def abort_embedding_migration(self, kb_id: Id) -> EmbeddingMigration | None:
        return self._send(Calls.abort_embedding_migration(kb_id))

    # documents
    def list_documents(self, kb_id: Id, *, status: str | None = None, limit: int | None = None,
                             cursor: str | None = None, filename_contains: str | None = None) -> Page[Document]:
        return self._send(Calls.list_documents(kb_id, status, limit, cursor, filename_contains))

    def iter_documents(self, kb_id: Id, *, status: str | None = None,
                             page_size: int = 200) -> Iterator[Document]:
        return self._iterate(lambda cursor: Calls.list_documents(kb_id, status, page_size, cursor, None))

    def get_document(self, document_id: Id) -> Document:
        return self._send(Calls.get_document(document_id))

    def upload(self, kb_id: Id, file: Any, *, filename: str | None = None, content_type: str | None = None,
                     progress: ProgressCallback | None = None, metadata: dict[str, Any] | None = None,
                     path: str | None = None) -> Document:
        """Upload bytes, a path or an open binary file; ``progress(sent, total)`` as it goes out;
        ``metadata``: the document's own fields; ``path``: where it lies in the folder being uploaded."""
        return self._send(Calls.upload(kb_id, make_upload(file, filename, content_type, progress, metadata,
                                                               path)))

    def update_metadata(self, document_id: Id, metadata: dict[str, Any]) -> Document:
        """Change the document's own fields (a JSON Merge Patch: a key set to None goes). Nothing is
        rebuilt; search sees the new values at once."""
        return self._send(Calls.update_metadata(document_id, metadata))

    def replace_content(self, document_id: Id, file: Any, *, filename: str | None = None,
                              content_type: str | None = None, progress: ProgressCallback | None = None) -> Document:
        """New bytes for an existing document (409 while it is being processed)."""
        return self._send(Calls.replace_content(document_id, make_upload(file, filename, content_type, progress)))

    def reindex_document(self, document_id: Id) -> Document:
        return self._send(Calls.reindex_document(document_id))

    def delete_document(self, document_id: Id, *, force: bool = False) -> Document:
        return self._send(Calls.delete_document(document_id, force))

    def list_chunks(self, document_id: Id, *, limit: int | None = None,
                          cursor: str | None = None) -> Page[Chunk]:
        return self._send(Calls.list_chunks(document_id, limit, cursor))

    def iter_chunks(self, document_id: Id, *, page_size: int = 100) -> Iterator[Chunk]:
        return self._iterate(lambda cursor: Calls.list_chunks(document_id, page_size, cursor))

    def stuck_documents(self, older_than_seconds: float | None = None) -> list[dict[str, Any]]:
        return self._send(Calls.stuck_documents(older_than_seconds))

    # search and answers
    def search(self, kb_id: Id, query: str, *, top_k: int = 10, mode: str | None = None,
                     filters: dict[str, Any] | None = None, min_score: float | None = None) -> SearchResults:
        return self._send(Calls.search(kb_id, query, top_k, mode, filters, min_score))

    def answer(self, kb_id: Id, question: str, *, top_k: int | None = None,
                     filters: dict[str, Any] | None = None,
                     messages: list[dict[str, str]] | None = None) -> Answer:
        return self._send(Calls.answer(kb_id, question, top_k, filters, messages))

    def metrics_text(self) -> str:
        response = self._http.get("/metrics")
        if not response.is_success:
            read_answer(response)
        return response.text

    # waiting
    def wait_until_ready(self, document_ids: Iterable[Id], *, timeout: float = 600.0,
                         poll_interval: float = 2.0, on_update: Callable[[Document], None] | None = None,
                         idle_timeout: float | None = None,
                         on_connection: Callable[[str | None], None] | None = None) -> list[Document]:
        """Wait until every document is stable (READY, FAILED, DELETED or OUTDATED) and return them, in
        order; a server that restarts is waited for. The arguments and rules of
        :meth:`AsyncClient.wait_until_ready`."""
        return self._run(waiting.wait_until_ready(document_ids, self.retry, timeout, poll_interval, on_update,
                                                  idle_timeout, on_connection))

"""The MCP tools (official ``mcp`` SDK). Every tool goes through the HTTP API with the caller's key
(:mod:`ultimate_rag.client`), so an agent gets exactly the access of that key: a reader key cannot
write, another knowledge base is not there. Results carry their citations (file, heading path, page)."""

from __future__ import annotations

import base64
import binascii
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Annotated, Any, TypeVar
from uuid import UUID

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from .. import __version__
from ..client import AnswerCitation, ApiError, AsyncClient, Chunk, Document, SearchHit, TransportError
from ..client._core import not_found_route

ClientFor = Callable[[Context], AbstractAsyncContextManager[AsyncClient]]
T = TypeVar("T")
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

FILTERS = ("optional, combined with AND: document_ids, filename (glob), mime_types, created_after, created_before, "
           "updated_after, updated_before (ISO 8601), connector_id, heading, and metadata: the documents' own "
           'fields, e.g. {"office": "Berlin", "year": {"$gte": 2024}, "tags": {"$contains": "hr"}} (operators $eq '
           "$ne $gt $gte $lt $lte $in $nin $contains $exists, $and/$or lists; doc.author names a nested field)")
INSTRUCTIONS = """ultimate-rag knowledge bases. Call list_knowledge_bases first, then search one (by name
or id). Cite results by their `citation` (file, heading path, page). read_chunks shows the passages
around a hit; answer gives a grounded answer when the server has a model configured."""


def build_server(client_for: ClientFor, *, local_files: bool, call_timeout: float | None = None) -> MCPServer:
    """The tools, each using ``client_for(ctx)`` for its API calls. ``local_files``: whether
    ``upload_document`` may read a path (stdio only: the agent's own machine, never the server's).
    ``call_timeout``: the longest a tool's calls may take in all (in-process, where the HTTP
    client's own timeouts never fire)."""
    server = _quiet(lambda: MCPServer("ultimate-rag", version=__version__, instructions=INSTRUCTIONS))

    async def call(ctx: Context, work: Callable[[AsyncClient], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(call_timeout):
                async with client_for(ctx) as rag:
                    return await work(rag)
        except TimeoutError as exc:
            raise ToolError(f"the call took longer than {call_timeout:g} s and was stopped") from exc
        except ApiError as exc:
            raise ToolError(f"{exc.detail} (HTTP {exc.status_code})") from exc
        except TransportError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(annotations=READ)
    async def list_knowledge_bases(ctx: Context) -> dict[str, Any]:
        """The knowledge bases this key can see, with their documents per status."""
        async def work(rag: AsyncClient) -> dict[str, Any]:
            kbs = await rag.list_knowledge_bases()
            return {"knowledge_bases": [{"id": kb.id, "name": kb.name, "description": kb.description,
                                         "document_counts": kb.document_counts} for kb in kbs]}
        return await call(ctx, work)

    @server.tool(annotations=READ)
    async def search(
        ctx: Context,
        knowledge_base: Annotated[str, Field(description="name or id")],
        query: str,
        top_k: Annotated[int, Field(ge=1, le=50)] = 8,
        mode: Annotated[str | None, Field(pattern="^(hybrid|dense|sparse)$",
                                          description="hybrid (default), dense or sparse")] = None,
        filters: Annotated[dict[str, Any] | None, Field(description=FILTERS)] = None,
    ) -> dict[str, Any]:
        """Search a knowledge base; every result cites its file, heading path and page. A query naming
        an identifier (error code, ticket, part, clause or version number) gets the passages holding it
        first; ``unmatched_identifiers`` lists those no passage holds (the results are then the usual)."""
        async def work(rag: AsyncClient) -> dict[str, Any]:
            kb = await rag.find_knowledge_base(knowledge_base)
            hits = await rag.search(kb.id, query, top_k=top_k, mode=mode, filters=filters)
            return {"knowledge_base": kb.name, "results": [_hit(h) for h in hits],
                    "unmatched_identifiers": hits.unmatched_identifiers}
        return await call(ctx, work)

    @server.tool(annotations=READ)
    async def get_document(ctx: Context, document_id: str) -> dict[str, Any]:
        """A document's status, its own fields (metadata), error, progress, chunks, parser and dates."""
        document_id = _uuid("document_id", document_id)

        async def work(rag: AsyncClient) -> dict[str, Any]:
            return _document(await rag.get_document(document_id))
        return await call(ctx, work)

    @server.tool(annotations=READ)
    async def read_chunks(
        ctx: Context, document_id: str,
        chunk_id: Annotated[str | None, Field(description="a hit's chunk_id: the window is centred on it")] = None,
        before: Annotated[int, Field(ge=0, le=20)] = 2,
        after: Annotated[int, Field(ge=0, le=20)] = 2,
    ) -> dict[str, Any]:
        """The passages of a document around a search hit (or its first passages), in order."""
        document_id = _uuid("document_id", document_id)
        if chunk_id is not None:
            chunk_id = _uuid("chunk_id", chunk_id)

        async def work(rag: AsyncClient) -> dict[str, Any]:
            doc = await rag.get_document(document_id)
            window = await _window(rag.iter_chunks(document_id), chunk_id, before, after)
            if window is None:
                raise ToolError(f"chunk {chunk_id} is not in document {document_id}")
            return {"document_id": doc.id, "filename": doc.filename,
                    "chunks": [_chunk(doc, c, c.id == chunk_id) for c in window]}
        return await call(ctx, work)

    @server.tool(annotations=READ)
    async def answer(
        ctx: Context, knowledge_base: Annotated[str, Field(description="name or id")], question: str,
        top_k: Annotated[int | None, Field(ge=1, le=50)] = None,
        filters: Annotated[dict[str, Any] | None, Field(description=FILTERS)] = None,
    ) -> dict[str, Any]:
        """A grounded answer with numbered citations, when the server has a language model configured;
        otherwise the relevant passages and the reason there is no answer."""
        async def work(rag: AsyncClient) -> dict[str, Any]:
            kb = await rag.find_knowledge_base(knowledge_base)
            try:
                result = await rag.answer(kb.id, question, top_k=top_k, filters=filters)
            except ApiError as exc:
                if not_found_route(exc):
                    raise ToolError("this server has no answer endpoint (no model configured); "
                                    "use search instead") from exc
                raise
            out: dict[str, Any] = {"answer": result.answer, "grounded": result.grounded,
                                   "citations": [_cited(c) for c in result.citations],
                                   "unmatched_identifiers": result.unmatched_identifiers}
            if result.answer is None:
                out["reason"] = result.reason or "no model configured"
            return out
        return await call(ctx, work)

    @server.tool(annotations=WRITE)
    async def upload_document(
        ctx: Context, knowledge_base: Annotated[str, Field(description="name or id")],
        filename: Annotated[str, Field(description="the name to store, e.g. notes.md (its extension picks the "
                                                   "parser)")],
        text: Annotated[str | None, Field(description="the document as text")] = None,
        content_base64: Annotated[str | None, Field(description="the file's bytes, base64")] = None,
        path: Annotated[str | None, Field(description="a local file (only with `ultimate-rag mcp` over stdio)")]
        = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="the document's own fields, e.g. "
                                                                      '{"office": "Berlin", "tags": ["hr"]}')] = None,
    ) -> dict[str, Any]:
        """Add a document (editor keys): give exactly one of text, content_base64 or path. It is
        processed in the background: get_document shows when it is READY."""
        if sum(x is not None for x in (text, content_base64, path)) != 1:
            raise ToolError("give exactly one of text, content_base64 or path")
        if path is not None and not local_files:
            raise ToolError("path is only available over stdio; send content_base64 instead")
        try:
            if text is not None:
                content = text.encode()
            elif content_base64 is not None:
                content = base64.b64decode(content_base64, validate=True)
            else:
                assert path is not None  # exactly one of the three is given (checked above)
                content = await anyio.to_thread.run_sync(_read_local, path)
        except (binascii.Error, ValueError) as exc:
            raise ToolError("content_base64 is not valid base64") from exc
        except OSError as exc:
            raise ToolError(f"cannot read {path}: {exc.strerror}") from exc

        async def work(rag: AsyncClient) -> dict[str, Any]:
            kb = await rag.find_knowledge_base(knowledge_base)
            return _document(await rag.upload(kb.id, content, filename=Path(filename).name or "document.txt",
                                              metadata=metadata))
        return await call(ctx, work)

    @server.tool(annotations=WRITE)
    async def update_document_metadata(
        ctx: Context, document_id: str,
        metadata: Annotated[dict[str, Any], Field(description="fields to set; a field set to null is removed, "
                                                             "an object merges into the one it replaces")],
    ) -> dict[str, Any]:
        """Change a document's own fields (editor keys). Nothing is rebuilt: search filters see the
        new values at once. doc, front_matter, s3 and source are filled in by ultimate-rag."""
        document_id = _uuid("document_id", document_id)

        async def work(rag: AsyncClient) -> dict[str, Any]:
            return _document(await rag.update_metadata(document_id, metadata))
        return await call(ctx, work)

    @server.tool(annotations=WRITE)
    async def reindex(
        ctx: Context, document_id: Annotated[str | None, Field(description="one document")] = None,
        knowledge_base: Annotated[str | None, Field(description="every stable document of it (name or id)")]
        = None,
    ) -> dict[str, Any]:
        """Parse, chunk and index again (editor keys): one document, or a whole knowledge base."""
        if (document_id is None) == (knowledge_base is None):
            raise ToolError("give either document_id or knowledge_base")
        if document_id is not None:
            document_id = _uuid("document_id", document_id)

        async def work(rag: AsyncClient) -> dict[str, Any]:
            if document_id is not None:
                return _document(await rag.reindex_document(document_id))
            assert knowledge_base is not None  # exactly one of the two is given (checked above)
            kb = await rag.find_knowledge_base(knowledge_base)
            done = await rag.reindex_knowledge_base(kb.id)
            return {"knowledge_base": kb.name, "queued": done.queued, "skipped_active": done.skipped_active}
        return await call(ctx, work)

    return server


def _uuid(name: str, value: str) -> str:
    """Ids go into URL paths: only a UUID is one (``../../mcp`` is not, whatever the escaping)."""
    try:
        return str(UUID(value))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ToolError(f"{name} must be a UUID, like the ids search results carry") from exc


def _quiet(make: Callable[[], MCPServer]) -> MCPServer:
    """The SDK configures the root logger when none is set; keep the process's own logging as it is."""
    root = logging.getLogger()
    before = list(root.handlers)
    server = make()
    for handler in root.handlers[len(before):] if root.handlers[:len(before)] == before else []:
        root.removeHandler(handler)
    logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)
    return server


async def _window(chunks: AsyncIterator[Chunk], chunk_id: str | None, before: int,
                  after: int) -> list[Chunk] | None:
    """``before`` chunks, the one with ``chunk_id``, ``after`` chunks; pages are read only as far as needed."""
    if chunk_id is None:
        first: list[Chunk] = []
        async for c in chunks:
            first.append(c)
            if len(first) > before + after:
                break
        return first
    previous: deque[Chunk] = deque(maxlen=before)
    window: list[Chunk] | None = None
    async for c in chunks:
        if window is not None:
            window.append(c)
            if len(window) > before + after:
                break
        elif c.id == chunk_id:
            window = [*previous, c]
            if after == 0:
                break
            before = len(previous)
        else:
            previous.append(c)
    return window


def _citation(filename: str, heading_path: list[str], locator: dict[str, Any],
              source_path: str | None) -> dict[str, Any]:
    from ..client import Citation

    c = Citation(document_id="", filename=filename, heading_path=heading_path, locator=locator,
                 source_path=source_path)
    return {"citation": str(c), "filename": filename, "source_path": source_path, "heading_path": heading_path,
            "page": c.page, "locator": locator}


def _hit(h: SearchHit) -> dict[str, Any]:
    return {**_citation(h.filename, h.heading_path, h.locator, h.source_path), "document_id": h.document_id,
            "chunk_id": h.chunk_id, "score": round(h.score, 4), "content": h.content, "metadata": h.metadata}


def _cited(c: AnswerCitation) -> dict[str, Any]:
    cite = c.citation
    return {"n": c.n, **_citation(cite.filename, cite.heading_path, cite.locator, cite.source_path),
            "document_id": cite.document_id, "chunk_id": c.chunk_id, "content": c.content, "metadata": c.metadata}


def _chunk(doc: Document, c: Chunk, hit: bool) -> dict[str, Any]:
    return {"chunk_id": c.id, "ordinal": c.ordinal, "hit": hit,
            **_citation(doc.filename, c.heading_path, c.locator, doc.source_path), "content": c.content}


def _document(d: Document) -> dict[str, Any]:
    keys = ("id", "knowledge_base_id", "filename", "source", "mime_type", "size_bytes", "sha256", "status",
            "error_message", "searchable", "published_revision", "content_revision", "attempts", "chunk_count",
            "progress", "parser", "duplicate_of", "metadata", "created_at", "updated_at", "indexed_at")
    return {k: d.raw.get(k) for k in keys if k in d.raw}


def _read_local(path: str) -> bytes:
    return Path(path).expanduser().read_bytes()

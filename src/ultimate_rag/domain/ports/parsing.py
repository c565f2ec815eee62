"""From bytes to chunks: the parsers, the registry that picks one, the runner that isolates a
parse, the optional image describer, and the chunker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable
from uuid import UUID

from ..models import Chunk, DocumentSource, ParsedDocument


@runtime_checkable
class Parser(Protocol):
    name: str
    version: str

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool: ...
    def parse(self, source: DocumentSource) -> ParsedDocument: ...


class ParserResolver(Protocol):
    """The parser registry, as the services need it."""

    @property
    def parsers(self) -> tuple[Parser, ...]: ...
    def resolve(self, source: DocumentSource) -> Parser: ...
    def mime_type(self, parser: Parser, source: DocumentSource) -> str:
        """The type to store and serve: what the content was detected to be (through the parser it
        resolved to), never what the client said."""


class ParseExecutor(Protocol):
    """Runs a parser (isolated in a child process, or in a thread), reporting pages done."""

    async def parse(self, parser: Parser, source: DocumentSource,
                    on_progress: Callable[[int, int], Awaitable[None]] | None = None) -> ParsedDocument: ...


class ImageDescriber(Protocol):
    """A vision model: what an image shows, in words (``context``: its caption or alt text).
    Failures raise ``TransientError``: the job retries."""

    async def describe(self, data: bytes, mime_type: str, context: str = "") -> str: ...


class Chunker(Protocol):
    def split(self, parsed: ParsedDocument, *, document_id: UUID, knowledge_base_id: UUID,
              revision: int, chunk_size: int, overlap: int) -> list[Chunk]: ...

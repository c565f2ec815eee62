"""Choose a parser for a document from what its content is, before anything is stored."""

from __future__ import annotations

from collections.abc import Sequence

from ultimate_rag.domain.errors import UnsupportedFormatError
from ultimate_rag.domain.models import DocumentSource
from ultimate_rag.domain.ports import Parser

from .detect import OCTET_STREAM, detect_kind, mime_for_kind
from .diagnose import diagnose
from .limits import ParseLimits
from .markdown import MarkdownParser
from .text import PlainTextParser


class ParserRegistry:
    def __init__(self, parsers: Sequence[Parser]) -> None:
        self._parsers = tuple(parsers)

    @property
    def parsers(self) -> tuple[Parser, ...]:
        return self._parsers

    @property
    def supported_extensions(self) -> tuple[str, ...]:
        """The file extensions the parsers read (each parser's ``extensions``), for a 415 answer."""
        return tuple(sorted({ext for p in self._parsers for ext in getattr(p, "extensions", ())}))

    def detect(self, source: DocumentSource) -> str:
        return detect_kind(source.content, source.extension)

    def mime_type(self, parser: Parser, source: DocumentSource) -> str:
        return detected_mime(parser.name, source)

    def resolve(self, source: DocumentSource) -> Parser:
        """The first parser that accepts the document; UnsupportedFormatError when none does."""
        kind = self.detect(source)
        for parser in self._parsers:
            if parser.accepts(source, kind):
                return parser
        supported = self.supported_extensions
        problem = diagnose(source.content, source.extension, kind, supported)
        if problem is not None:  # empty, damaged, encrypted, an encoding we do not read: said as such
            raise problem
        reason = unsupported_reason(kind, source.extension)
        if supported:
            reason += f"; supported formats: {', '.join(supported)}"
        raise UnsupportedFormatError(reason, supported_formats=supported)


# the MIME type recorded for a document, by the parser its detected content resolved to
_MIME_BY_PARSER = {"markdown": "text/markdown", "text": "text/plain", "pdf": "application/pdf",
                   "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                   "html": "text/html", "csv": "text/csv",
                   "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
                   "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                   "epub": "application/epub+zip"}


def detected_mime(parser_name: str, source: DocumentSource) -> str:
    """The type to record and serve for a document: from its parser (which the detected content
    chose) or the detected kind, never the client's Content-Type."""
    if parser_name == "csv" and source.extension == ".tsv":
        return "text/tab-separated-values"
    if parser_name in _MIME_BY_PARSER:
        return _MIME_BY_PARSER[parser_name]
    return mime_for_kind(detect_kind(source.content, source.extension))


def unsupported_reason(kind: str, extension: str) -> str:
    ext = extension or "(none)"
    if kind == f"binary:{OCTET_STREAM}":
        return f"unsupported file format: content is binary data, not text (extension {ext})"
    if kind.startswith("binary:"):
        return f"unsupported file format: content looks like {kind.removeprefix('binary:')} (extension {ext})"
    if kind == "unknown":
        return f"unsupported file format: {ext}"
    return f"unsupported file format: {kind} content (extension {ext})"


def default_registry(limits: ParseLimits | None = None) -> ParserRegistry:
    """Every built-in parser. PDF, DOCX, HTML and the office formats load their libraries on first use."""
    from .docx import DocxParser
    from .epub import EpubParser
    from .html import HtmlParser
    from .image import ImageParser
    from .odf import OdfParser
    from .pdf import PdfParser
    from .sheets import XlsxParser
    from .slides import PptxParser
    from .tabular import CsvParser

    limits = limits or ParseLimits()
    return ParserRegistry([MarkdownParser(), PlainTextParser(), PdfParser(limits), DocxParser(limits),
                           HtmlParser(limits), CsvParser(limits), ImageParser(limits), PptxParser(limits),
                           XlsxParser(limits), EpubParser(limits), OdfParser(limits)])

"""Document parsers, format detection and the registry that picks a parser."""

from .detect import decode_text, detect_kind, mime_for_kind
from .markdown import MarkdownParser
from .registry import ParserRegistry, default_registry, unsupported_reason
from .text import PlainTextParser

__all__ = [
    "MarkdownParser",
    "ParserRegistry",
    "PlainTextParser",
    "decode_text",
    "default_registry",
    "detect_kind",
    "mime_for_kind",
    "unsupported_reason",
]

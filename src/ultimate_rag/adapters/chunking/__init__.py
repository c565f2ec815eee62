"""Chunking: structure-aware splitting of parsed documents under a token budget."""

from .chunker import StructuredChunker

__all__ = ["StructuredChunker"]

"""What the embedder sees of a chunk: its heading context, then its content (the chunker builds it;
the sparse backfill and an embedding-model migration rebuild it from a stored row)."""

from __future__ import annotations

from collections.abc import Sequence


def embedding_text(content: str, path: tuple[str, ...], context: str) -> str:
    """The heading context, then the content; nothing added when the content already starts with
    the section's headings (the first chunk of a section)."""
    if not context or _starts_with_headings(content, path):
        return content
    return f"{context}\n\n{content}"


def _starts_with_headings(content: str, path: tuple[str, ...]) -> bool:
    head = " ".join(" ".join(path).split())
    text = " ".join(content[:len(head) * 2 + 16].split())
    return text == head or text.startswith(head + " ")


def stored_embedding_text(content: str, heading_path: Sequence[str] | None) -> str:
    """A stored chunk's embedding text, rebuilt from its row as the chunker made it (the sparse
    backfill and an embedding-model migration embed chunks read back from the database)."""
    path = tuple(heading_path or ())
    return embedding_text(content, path, " > ".join(path))

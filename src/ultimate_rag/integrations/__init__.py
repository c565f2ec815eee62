"""Retrievers for the frameworks people already build with, over the Python client
(ultimate_rag.client): ``integrations.langchain`` (``pip install 'ultimate-rag[langchain]'``) and
``integrations.llama_index`` (``pip install 'ultimate-rag[llama-index]'``). Each returns the hits of
``POST /api/knowledge-bases/{kb_id}/search``, with our fields as the framework's metadata."""

from __future__ import annotations

from typing import Any

from ..client.models import SearchHit


def hit_metadata(hit: SearchHit, knowledge_base_id: str) -> dict[str, Any]:
    """A hit's fields as a framework's metadata: where it comes from (and a citation line to show),
    its score, and its document's own fields."""
    return {"chunk_id": hit.chunk_id, "document_id": hit.document_id, "knowledge_base_id": knowledge_base_id,
            "filename": hit.filename, "citation": str(hit.citation), "score": hit.score,
            "heading_path": list(hit.heading_path), "locator": dict(hit.locator), "page": hit.citation.page,
            "highlights": [list(h) for h in hit.highlights], "assets": list(hit.assets),
            "document_metadata": dict(hit.metadata)}


def missing(package: str, extra: str) -> ImportError:
    return ImportError(f"{package} is not installed: pip install 'ultimate-rag[{extra}]'")

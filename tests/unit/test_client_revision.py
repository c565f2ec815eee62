"""The client's Document carries where search stands: ``searchable`` and ``published_revision``."""

from __future__ import annotations

from ultimate_rag.client.models import Document


def test_document_json_says_what_search_serves() -> None:
    rebuilding = Document.from_json({"id": "d", "knowledge_base_id": "k", "filename": "f", "status": "PENDING",
                                     "searchable": True, "published_revision": 1, "content_revision": 2})
    assert (rebuilding.searchable, rebuilding.published_revision, rebuilding.content_revision) == (True, 1, 2)
    new = Document.from_json({"id": "d", "knowledge_base_id": "k", "filename": "f", "status": "PENDING"})
    assert (new.searchable, new.published_revision, new.content_revision) == (False, None, 1)

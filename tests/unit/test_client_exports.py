"""What ``ultimate_rag.client`` exports: the clients, and every result type and error class, each
named once in its own module's ``__all__`` (a class added there is exported without a second list)."""

from __future__ import annotations

import ultimate_rag.client as client
from ultimate_rag.client import errors, models

# the names the package has always exported: none may disappear
EXPORTED = {
    "DEFAULT_URL", "Answer", "AnswerCitation", "ApiError", "AsyncClient", "AuthenticationFailed", "BadRequest",
    "Chunk", "Citation", "Client", "Conflict", "Document", "EmbeddingMigration", "KnowledgeBase", "NotFound", "Page",
    "PayloadTooLarge", "PermissionDenied", "RateLimited", "ReindexResult", "RetryPolicy", "SearchHit", "SearchResults",
    "ServerError", "ServiceUnavailable", "TransportError", "UltimateRagError", "UnsupportedFormat", "ValidationFailed",
}


def _classes_of(module: object) -> set[str]:
    return {name for name, value in vars(module).items()
            if isinstance(value, type) and value.__module__ == getattr(module, "__name__", None)
            and not name.startswith("_")}


def test_every_result_type_and_error_class_is_exported_once() -> None:
    assert _classes_of(errors) == set(errors.__all__)
    assert _classes_of(models) == set(models.__all__)
    assert sorted(client.__all__) == sorted(set(client.__all__))
    assert set(client.__all__) == EXPORTED
    for name in client.__all__:
        value = getattr(client, name)
        assert value is getattr(errors, name, value) and value is getattr(models, name, value)

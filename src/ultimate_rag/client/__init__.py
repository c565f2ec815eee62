"""A Python client for the ultimate-rag HTTP API, sync and async (httpx).

    from ultimate_rag.client import Client

    with Client("http://127.0.0.1:8000", key) as rag:
        kb = rag.find_knowledge_base("handbook")
        doc = rag.upload(kb.id, "guide.pdf", progress=lambda sent, total: print(sent, total))
        [doc] = rag.wait_until_ready([doc.id])
        for hit in rag.search(kb.id, "how do I reset my password?", top_k=5):
            print(hit.score, hit.citation, hit.content[:80])

``AsyncClient`` has the same methods, awaited. API errors are raised as :class:`ApiError`
subclasses carrying the server's message; 429 and 503 are retried with backoff (``Retry-After``).
"""

from ._core import DEFAULT_URL, RetryPolicy
from .aio import AsyncClient
from .errors import (
    ApiError,
    AuthenticationFailed,
    BadRequest,
    Conflict,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    TransportError,
    UltimateRagError,
    UnsupportedFormat,
    ValidationFailed,
)
from .models import (
    Answer,
    AnswerCitation,
    Chunk,
    Citation,
    Document,
    EmbeddingMigration,
    KnowledgeBase,
    Page,
    ReindexResult,
    SearchHit,
)
from .sync import Client

__all__ = [
    "DEFAULT_URL", "Answer", "AnswerCitation", "ApiError", "AsyncClient", "AuthenticationFailed", "BadRequest",
    "Chunk", "Citation", "Client", "Conflict", "Document", "EmbeddingMigration", "KnowledgeBase", "NotFound", "Page",
    "PayloadTooLarge",
    "PermissionDenied", "RateLimited", "ReindexResult", "RetryPolicy", "SearchHit", "ServerError",
    "ServiceUnavailable", "TransportError", "UltimateRagError", "UnsupportedFormat", "ValidationFailed",
]

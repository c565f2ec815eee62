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

from . import errors, models
from ._core import DEFAULT_URL, RetryPolicy
from .aio import AsyncClient
from .errors import *  # noqa: F403 - every error class (errors.__all__)
from .models import *  # noqa: F403 - the typed results (models.__all__)
from .sync import Client

__all__ = ["DEFAULT_URL", "AsyncClient", "Client", "RetryPolicy"]
__all__ += errors.__all__
__all__ += models.__all__

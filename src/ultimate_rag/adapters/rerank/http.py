"""A cross-encoder behind the de-facto ``/v1/rerank`` API (docs/search.md): Text Embeddings
Inference, Infinity, vLLM, Jina- and Cohere-compatible services. The request is Cohere's and
Jina's (``{"model", "query", "documents", "top_n"}``); the answer is read in either common shape:
``{"results": [{"index", "relevance_score"}]}`` (Cohere, Jina, vLLM, Infinity) or TEI's own
``[{"index", "score"}]``.

* ``ULTIMATE_RAG_RERANK_BASE_URL`` is the server (``http://host:8080``) or its ``/v1`` root; the
  request goes to ``{server}/v1/rerank``.
* Timeouts, dropped connections, 429 and 5xx are retried ``max_retries`` times with a short
  backoff, then raised as ``ProviderTimeoutError`` / ``ProviderError``: the search answers 504 /
  502 with a sentence saying the reranker failed. 4xx are configuration errors, not retried, and
  name the setting to check.
* The key travels only in the ``Authorization`` header; no message or log line carries it or the
  server's error body, and the URL is redacted in both.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from typing import Any

import httpx

from ...domain.errors import ProviderError, ProviderTimeoutError
from ...domain.redact import redact_url
from ..http.loop_client import LoopClient

log = logging.getLogger(__name__)
_HINTS = {401: "check ULTIMATE_RAG_RERANK_API_KEY", 403: "check ULTIMATE_RAG_RERANK_API_KEY",
          404: "check ULTIMATE_RAG_RERANK_BASE_URL (the server; /v1/rerank is added)",
          400: "check ULTIMATE_RAG_RERANK_MODEL", 422: "check ULTIMATE_RAG_RERANK_MODEL"}


def rerank_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return f"{base}/rerank" if base.endswith("/v1") else f"{base}/v1/rerank"


class HttpReranker:
    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, timeout: float = 10.0,
                 max_retries: int = 2, retry_backoff: float = 0.3) -> None:
        if not base_url or not model:
            raise ValueError("reranking needs ULTIMATE_RAG_RERANK_BASE_URL and ULTIMATE_RAG_RERANK_MODEL")
        self.url = rerank_url(base_url)
        self.name = model
        self._where = redact_url(self.url)
        self._api_key = api_key
        self._seconds = timeout
        self._max_retries = max(0, max_retries)
        self._backoff = retry_backoff
        self._clients = LoopClient(lambda: httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(5.0, timeout))))

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Each document's relevance to ``query``, in the documents' order."""
        if not documents:
            return []
        body = {"model": self.name, "query": query, "documents": list(documents), "top_n": len(documents),
                "return_documents": False}
        for attempt in range(self._max_retries + 1):
            try:
                return _scores(await self._post(body), len(documents))
            except _Retryable as failure:
                if attempt == self._max_retries:
                    raise failure.error from None
                delay = self._backoff * 2 ** attempt * random.uniform(0.8, 1.2)
                log.info("reranker request failed (%s); try %d of %d in %.1f s", failure.error.message,
                         attempt + 2, self._max_retries + 1, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            response = await self._clients.get().post(self.url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise _Retryable(ProviderTimeoutError(
                f"the reranker at {self._where} did not answer within {self._seconds:g} s")) from exc
        except httpx.TransportError as exc:
            raise _Retryable(ProviderError(
                f"the reranker at {self._where} could not be reached: {type(exc).__name__}")) from exc
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(ProviderError(f"the reranker at {self._where} answered HTTP {status}"))
        if status >= 400:
            log.warning("the reranker refused a request with HTTP %s", status)
            raise ProviderError(f"the reranker refused the request (HTTP {status}): "
                                f"{_HINTS.get(status, 'check the ULTIMATE_RAG_RERANK_* settings')}")
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError("the reranker's answer is not JSON") from exc


class _Retryable(Exception):
    def __init__(self, error: ProviderError) -> None:
        self.error = error


def _scores(answer: Any, count: int) -> list[float]:
    """The relevance of each of ``count`` documents from either answer shape; a document the answer
    leaves out scores below every one it ranks."""
    items = answer.get("results") if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise ProviderError("the reranker's answer has no results")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise ProviderError("the reranker's answer has a result that is not an object")
        index, score = item.get("index"), item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or not 0 <= index < count or not isinstance(score, int | float):
            raise ProviderError("the reranker's answer has a result without a valid index and score")
        scores[index] = float(score)
    floor = min((s for s in scores if s is not None), default=0.0) - 1.0
    return [floor if s is None else s for s in scores]

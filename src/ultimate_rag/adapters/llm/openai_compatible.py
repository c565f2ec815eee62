"""A chat model behind any OpenAI-compatible ``/chat/completions`` endpoint: DashScope/百炼
(compatible mode), OpenAI, vLLM, Ollama, llama.cpp servers.

* Timeouts, dropped connections and 5xx are retried ``max_retries`` times with exponential backoff
  and jitter, then raised as ``ProviderTimeoutError`` / ``ProviderError`` (the API answers 504 /
  502). A stream is retried only until its first byte: after that the text is already out. With
  ``retry_timeouts=False`` (a local endpoint, see ``endpoints.py``) a timeout is not retried.
* 429 waits for the server's ``Retry-After`` when it is at most ``max_retry_wait`` seconds (and
  tries are left); longer, it raises ``ProviderRateLimitedError`` at once (503 with Retry-After).
* 400/401/403/404/422 are configuration errors, not retried; the message names the setting to check.
* The API key is sent only in the ``Authorization`` header; no message or log line carries it or
  the provider's error body (a provider may echo the key back), and the base URL is redacted.
* Leaving a ``stream`` early (a client disconnected) closes the HTTP response: the provider sees
  the request cancelled.
* What the provider sends is checked, never trusted: a reply body or a stream line longer than
  ``max_reply_bytes`` is refused, ``choices`` that are not a list of objects are a readable
  ``ProviderError`` (502), and a usage report that is not two plausible counts is dropped (the
  usage is then estimated).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import httpx

from ...domain.chat import ChatMessage, ChatReply, ChatUsage
from ...domain.errors import ProviderError, ProviderRateLimitedError, ProviderTimeoutError
from ...domain.redact import redact_url
from ..embedders.openai import parse_retry_after
from ..http.loop_client import LoopClient

log = logging.getLogger(__name__)
_HINTS = {
    400: "check ULTIMATE_RAG_LLM_MODEL and ULTIMATE_RAG_LLM_MAX_OUTPUT_TOKENS",
    401: "check ULTIMATE_RAG_LLM_API_KEY",
    403: "check ULTIMATE_RAG_LLM_API_KEY and the account's access to this model",
    404: "check ULTIMATE_RAG_LLM_BASE_URL (it usually ends in /v1) and ULTIMATE_RAG_LLM_MODEL",
    422: "check ULTIMATE_RAG_LLM_MODEL",
}


class _Retry(Exception):
    def __init__(self, error: ProviderError, delay: float | None = None) -> None:
        self.error, self.delay = error, delay


class OpenAICompatibleChat:
    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, connect_timeout: float = 5.0,
                 timeout: float = 60.0, retry_timeouts: bool = True, max_retries: int = 2,
                 retry_backoff: float = 0.5,
                 max_retry_wait: float = 10.0, temperature: float | None = 0.2,
                 on_error: Callable[[str], None] | None = None, max_reply_bytes: int = 1 << 20) -> None:
        if not base_url or not model:
            raise ValueError("the chat model needs ULTIMATE_RAG_LLM_BASE_URL and ULTIMATE_RAG_LLM_MODEL")
        self.base_url = base_url.rstrip("/")
        self.name = model
        self._where = redact_url(self.base_url)
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._seconds = timeout
        self._retry_timeouts = retry_timeouts
        self._max_retries = max(0, max_retries)
        self._retry_backoff = retry_backoff
        self._max_retry_wait = max_retry_wait
        self._temperature = temperature
        self._on_error = on_error or (lambda kind: None)
        self._max_reply_bytes = max_reply_bytes
        self._clients = LoopClient(lambda: httpx.AsyncClient(timeout=self._timeout))

    # the port --------------------------------------------------------------------------------
    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> ChatReply:
        body = self._body(messages, max_tokens, stream=False)
        attempt = 0
        while True:
            try:
                response = await self._send(body)
                try:
                    raw = await self._read_capped(response)
                finally:
                    await response.aclose()
                return self._reply(raw)
            except _Retry as retry:
                attempt = await self._backoff(attempt, retry)

    async def stream(self, messages: Sequence[ChatMessage], *,
                     max_tokens: int) -> AsyncGenerator[str | ChatUsage, None]:
        body = self._body(messages, max_tokens, stream=True)
        attempt = 0
        while True:
            try:
                response = await self._send(body)
                break
            except _Retry as retry:
                attempt = await self._backoff(attempt, retry)
        try:
            async for line in self._lines(response):
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                piece, usage = self._chunk(data)
                if piece:
                    yield piece
                if usage is not None:
                    yield usage
        except httpx.TimeoutException as exc:
            self._on_error("timeout")
            raise ProviderTimeoutError(f"the language model stopped answering for {self._seconds:g} s") from exc
        except httpx.TransportError as exc:
            self._on_error("connection")
            raise ProviderError(f"the connection to the language model broke: {type(exc).__name__}") from exc
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._clients.aclose()

    # internals -------------------------------------------------------------------------------
    def _http(self) -> httpx.AsyncClient:
        return self._clients.get()

    def _body(self, messages: Sequence[ChatMessage], max_tokens: int, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "max_tokens": max_tokens, "stream": stream,
                                "messages": [{"role": m.role, "content": m.content} for m in messages]}
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    async def _send(self, body: dict[str, Any]) -> httpx.Response:
        """The response, its body not read yet (the callers read it in pieces, bounded)."""
        headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream" if body["stream"] else "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        client = self._http()
        try:
            request = client.build_request("POST", f"{self.base_url}/chat/completions", json=body, headers=headers)
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            self._on_error("timeout")
            silent = ProviderTimeoutError(f"the language model at {self._where} did not answer within "
                                          f"{self._seconds:g} s (ULTIMATE_RAG_LLM_TIMEOUT_SECONDS)")
            if not self._retry_timeouts:
                raise silent from exc
            raise _Retry(silent) from exc
        except httpx.TransportError as exc:
            self._on_error("connection")
            raise _Retry(ProviderError(f"the language model at {self._where} could not be reached: "
                                       f"{type(exc).__name__}")) from exc
        if response.status_code < 400:
            return response
        await response.aclose()
        status = response.status_code
        if status == 429:
            self._on_error("rate_limited")
            wait = parse_retry_after(response.headers, default=1.0)
            error = ProviderRateLimitedError(f"the language model is rate limited; try again in {wait:.0f} s",
                                             retry_after=wait)
            if wait > self._max_retry_wait:
                raise error
            raise _Retry(error, delay=wait)
        if status >= 500:
            self._on_error("server_error")
            raise _Retry(ProviderError(f"the language model answered HTTP {status}"))
        self._on_error("refused")
        log.warning("the language model refused a request with HTTP %s", status)
        hint = _HINTS.get(status, "check the ULTIMATE_RAG_LLM_* settings")
        raise ProviderError(f"the language model refused the request (HTTP {status}): {hint}")

    async def _backoff(self, attempt: int, retry: _Retry) -> int:
        attempt += 1
        if attempt > self._max_retries:
            raise retry.error
        delay = retry.delay
        if delay is None:
            delay = min(10.0, self._retry_backoff * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
        log.info("language model request failed (%s); try %d of %d in %.1f s", retry.error.message,
                 attempt + 1, self._max_retries + 1, delay)
        await asyncio.sleep(delay)
        return attempt

    async def _read_capped(self, response: httpx.Response) -> bytes:
        body = bytearray()
        try:
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) > self._max_reply_bytes:
                    self._on_error("bad_reply")
                    raise ProviderError(f"the language model's reply is larger than {self._max_reply_bytes} bytes")
        except httpx.TimeoutException as exc:
            self._on_error("timeout")
            raise _Retry(ProviderTimeoutError(f"the language model stopped answering for {self._seconds:g} s")) \
                from exc
        except httpx.TransportError as exc:
            self._on_error("connection")
            raise _Retry(ProviderError(f"the connection to the language model broke: {type(exc).__name__}")) from exc
        return bytes(body)

    async def _lines(self, response: httpx.Response) -> AsyncGenerator[str, None]:
        """The stream's lines; a line longer than ``max_reply_bytes`` is refused before it is whole."""
        pending = ""
        async for text in response.aiter_text():
            *lines, rest = text.split("\n")
            for line in lines:
                yield (pending + line).rstrip("\r")
                pending = ""
            pending += rest
            if len(pending) > self._max_reply_bytes:
                self._on_error("bad_reply")
                raise ProviderError(f"the language model sent a line longer than {self._max_reply_bytes} bytes")
        if pending:
            yield pending.rstrip("\r")

    def _reply(self, raw: bytes) -> ChatReply:
        try:
            reply = json.loads(raw)
            message = reply["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            self._on_error("bad_reply")
            raise ProviderError("the language model's reply has no message") from exc
        return ChatReply(_text(message.get("content")), _usage(reply.get("usage")))

    def _chunk(self, data: str) -> tuple[str, ChatUsage | None]:
        try:
            chunk = json.loads(data)
        except ValueError:
            return "", None
        if not isinstance(chunk, dict):
            return "", None
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            self._on_error("bad_reply")
            raise ProviderError("the language model sent a malformed stream (its choices are not a list)")
        piece = ""
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                piece += _text(delta.get("content"))
        return piece, _usage(chunk.get("usage"))


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else ""


def _usage(usage: Any) -> ChatUsage | None:
    if not isinstance(usage, dict):
        return None
    return ChatUsage.reported(usage.get("prompt_tokens"), usage.get("completion_tokens"))

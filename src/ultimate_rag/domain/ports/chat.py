"""Grounded answers' language model."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol, runtime_checkable

from ..chat import ChatMessage, ChatReply, ChatUsage


@runtime_checkable
class ChatModel(Protocol):
    """An OpenAI-compatible chat completions endpoint. Failures raise ``ProviderError`` (or its
    timeout / rate-limit kinds) after the adapter's own retries; ``stream`` yields text pieces and,
    last, the usage when the provider reports it. Closing the stream early cancels the request."""

    name: str

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> ChatReply: ...
    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> AsyncGenerator[str | ChatUsage, None]: ...

"""What a chat model takes and gives back (the ``ChatModel`` port): role-tagged messages, a reply
with its token usage, and usage reported at the end of a stream."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class ChatUsage:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False  # the provider sent no usage: counted here, conservatively

    def __add__(self, other: ChatUsage) -> ChatUsage:
        return ChatUsage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                         self.estimated or other.estimated)


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    usage: ChatUsage | None = None

"""What a chat model takes and gives back (the ``ChatModel`` port): role-tagged messages, a reply
with its token usage, and usage reported at the end of a stream."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


# More tokens than any model's context holds: a provider reporting this (or a negative count) is wrong,
# and its number must not reach the counters (one huge report would leave them at +Inf for good).
MAX_REPORTED_TOKENS = 10_000_000


@dataclass(frozen=True, slots=True)
class ChatUsage:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False  # the provider sent no usage: counted here, conservatively

    @classmethod
    def reported(cls, prompt_tokens: object, completion_tokens: object) -> ChatUsage | None:
        """A provider's usage report, or None when it is not two plausible whole numbers (then
        the usage is estimated instead)."""
        counts = []
        for value in (prompt_tokens, completion_tokens):
            if value is None:
                value = 0
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            if value != value or not 0 <= value <= MAX_REPORTED_TOKENS or int(value) != value:
                return None
            counts.append(int(value))
        return cls(counts[0], counts[1])

    def __add__(self, other: ChatUsage) -> ChatUsage:
        return ChatUsage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                         self.estimated or other.estimated)


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    usage: ChatUsage | None = None

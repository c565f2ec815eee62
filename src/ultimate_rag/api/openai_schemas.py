"""The OpenAI chat API's shapes (SPEC §10 "OpenAI-compatible", docs/openai.md): a request as the
OpenAI SDKs and chat front ends (Open WebUI, LibreChat) send it, and the ``chat.completion`` /
``chat.completion.chunk`` objects they read, carrying a grounded answer: its text with a numbered
sources list, and the citations as a structured ``citations`` field.

OpenAI's other parameters (temperature, top_p, n, tools, user, ...) are accepted and ignored: the
answer is the knowledge base's grounded answer, made as ``/answer`` makes it."""

from __future__ import annotations

import time
from typing import Any
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from ..domain.chat import ChatMessage
from ..domain.errors import UnprocessableRequestError
from ..domain.models import KnowledgeBase
from ..services.answering import Answer, Prepared
from ..services.grounding import Passage
from .answer_schemas import citations
from .search_schemas import SearchFiltersIn

SOURCES = {"en": "Sources", "zh": "来源", "ko": "출처"}
EXCERPT_CHARS = 400  # of each passage shown when no model answers


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(max_length=32)
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The message's text: a string, or its ``text`` parts joined (images and files are left out)."""
        if isinstance(self.content, str):
            return self.content
        parts = [p.get("text") for p in self.content or () if p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))


class StreamOptionsIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # OpenAI's other parameters: accepted, not used

    model: str = Field(min_length=1, max_length=200, description="a knowledge base's name or id")
    messages: list[MessageIn] = Field(min_length=1, max_length=100)
    stream: bool = False
    stream_options: StreamOptionsIn | None = None
    filters: SearchFiltersIn | None = Field(default=None, description="search filters, as /answer takes them "
                                            "(an extra body field: extra_body in the OpenAI SDKs)")
    top_k: int = Field(default=8, ge=1, description="passages retrieved (as /answer)")

    def question_and_history(self, max_chars: int = 20_000) -> tuple[str, list[ChatMessage]]:
        """The last user message is the question; the user and assistant turns before it are the
        conversation (system and tool messages are not: the grounded prompt is the product's)."""
        turns = [(m.role, m.text()) for m in self.messages if m.role in ("user", "assistant")]
        if not turns or turns[-1][0] != "user" or not turns[-1][1].strip():
            raise UnprocessableRequestError("messages: the last user or assistant message must be the user's "
                                            "question, with text")
        if any(len(text) > max_chars for _, text in turns):
            raise UnprocessableRequestError(f"messages: each message is at most {max_chars} characters")
        return turns[-1][1], [ChatMessage(role, text) for role, text in turns[:-1] if text.strip()][-50:]


def model_of(kb: KnowledgeBase) -> dict[str, Any]:
    return {"id": kb.name, "object": "model", "created": int(kb.created_at.timestamp()), "owned_by": "ultimate-rag",
            "knowledge_base_id": str(kb.id), "description": kb.description}


def sources_text(prepared: Prepared, cited: list[int], *, excerpts: bool = False) -> str:
    """The numbered sources list under an answer: the passages it cites (with no model, every
    passage, with an excerpt), in the question's language; empty when there is none."""
    shown = [p for p in prepared.passages if excerpts or p.n in cited]
    if not shown:
        return ""
    lines = [f"{SOURCES.get(prepared.language, SOURCES['en'])}:"]
    lines += [_source_line(p, excerpts) for p in shown]
    return "\n\n" + "\n".join(lines)


def _source_line(p: Passage, excerpt: bool) -> str:
    if not excerpt:
        return p.header()
    text = " ".join(p.result.content.split())
    return f"{p.header()}\n> {text[:EXCERPT_CHARS]}{'…' if len(text) > EXCERPT_CHARS else ''}"


def lead_text(prepared: Prepared) -> str:
    """What a chat shows before the sources when the model is not asked: the no-answer sentence,
    or the reason there is no model."""
    return prepared.answer or prepared.reason or ""


class Completion:
    """One completion's identity, and the objects a client reads, built from the grounded answer."""

    def __init__(self, kb: KnowledgeBase, prepared: Prepared) -> None:
        self.id = f"chatcmpl-{uuid4().hex}"
        self.created = int(time.time())
        self.model = kb.name
        self.prepared = prepared

    def _base(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def citations(self) -> list[dict[str, Any]]:
        return [c.model_dump(mode="json") for c in citations(self.prepared.passages)]

    def whole(self, answer: Answer) -> dict[str, Any]:
        text = (answer.text if answer.text is not None else lead_text(self.prepared)) + self.tail(answer)
        return self._base("chat.completion") | {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "logprobs": None, "finish_reason": finish_reason(answer)}],
            "usage": usage(answer), "citations": self.citations(), "cited": answer.cited,
            "query": answer.prepared.query, "language": answer.prepared.language}

    def tail(self, answer: Answer) -> str:
        return sources_text(self.prepared, answer.cited, excerpts=answer.text is None)

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return self._base("chat.completion.chunk") | {
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]} | extra

    def usage_chunk(self, answer: Answer) -> dict[str, Any]:
        return self._base("chat.completion.chunk") | {"choices": [], "usage": usage(answer)}


def finish_reason(answer: Answer) -> str:
    """``length`` when the model was asked and its answer was cut (in bytes or in time: the
    answer's ``reason`` says which, and a model that was asked has a reason only then), else ``stop``."""
    asked = answer.prepared.messages is not None
    return "length" if asked and answer.prepared.reason is not None else "stop"


def usage(answer: Answer) -> dict[str, int]:
    u = answer.usage
    prompt, completion = (u.prompt_tokens, u.completion_tokens) if u is not None else (0, 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

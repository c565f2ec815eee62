"""Grounded answers (SPEC §10): a follow-up is rewritten into a standalone query (when a chat model
is configured), the knowledge base is searched through the search service (same READY rule, same
key scoping: only the knowledge base the route let the key read), the best passages that fit the
context budget go into the prompt, and the model's answer comes back with its citations checked.

Nothing relevant retrieved (no passage scores ``min_score`` or more) → a fixed message in the
question's language and no model call. No chat model configured → the passages, ``answer: None``
and the reason. ``prepare`` does everything up to the model call, so its errors (bad request,
provider failure while rewriting) are plain HTTP errors even for a streamed answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ..domain.chat import ChatMessage, ChatUsage
from ..domain.errors import AuthenticationError, InvalidRequestError, ProviderTimeoutError
from ..domain.models import SearchOutcome
from ..domain.ports import ChatModel
from ..domain.search import SearchFilters
from ..observability import AnswerMetrics
from .bounded_stream import Check, StreamDeadline, StreamRefused, bounded
from .grounding import (
    NOTHING_RELEVANT,
    CitationFilter,
    Passage,
    answer_messages,
    clean_rewrite,
    detect_language,
    rewrite_messages,
    select_passages,
)
from .search import SearchService

NO_MODEL = ("no language model is configured (set ULTIMATE_RAG_LLM_BASE_URL and ULTIMATE_RAG_LLM_MODEL): "
            "these are the passages that match the question")


def nothing_relevant(min_score: float) -> str:
    return f"nothing relevant was retrieved (no passage scored {min_score:g} or more): the model was not asked"


@dataclass(frozen=True)
class AnswerConfig:
    """The limits of an answer. Their defaults are the settings' (``make_answers`` in bootstrap/retrieval.py
    passes them); only the rewrite's budget is not a setting."""

    min_score: float
    context_tokens: int
    history_tokens: int
    max_output_tokens: int
    max_query_chars: int
    max_answer_bytes: int = 65536
    max_answer_seconds: float = 120.0
    rewrite_max_tokens: int = 96


@dataclass
class Prepared:
    question: str
    query: str
    language: str
    passages: list[Passage]
    messages: list[ChatMessage] | None  # None: the model is not asked
    answer: str | None = None  # the answer when the model is not asked
    reason: str | None = None
    started: float = field(default_factory=time.perf_counter)
    timing: dict[str, float] = field(default_factory=dict)
    usage: ChatUsage | None = None
    unmatched_identifiers: tuple[str, ...] = ()  # named by the question, held by no searchable chunk


@dataclass
class Answer:
    prepared: Prepared
    text: str | None
    cited: list[int]
    invalid: list[int]
    usage: ChatUsage | None
    timing: dict[str, float]

    @property
    def grounded(self) -> bool:
        """The answer cites at least one passage. An answer citing none (the model ignored the
        passages or found nothing in them) must not look like one that rests on the documents."""
        return bool(self.text) and bool(self.cited)

    def body(self) -> dict[str, Any]:
        """The JSON answer without the citations (the ``done`` event of a stream)."""
        p = self.prepared
        out: dict[str, Any] = {"answer": self.text, "query": p.query, "language": p.language, "cited": self.cited,
                               "grounded": self.grounded, "invalid_citations": self.invalid, "timing": self.timing,
                               "unmatched_identifiers": list(p.unmatched_identifiers)}
        if p.reason:
            out["reason"] = p.reason
        if self.usage is not None:
            out["usage"] = {"prompt_tokens": self.usage.prompt_tokens,
                            "completion_tokens": self.usage.completion_tokens, "estimated": self.usage.estimated}
        return out


class AnswerService:
    def __init__(self, *, search: SearchService, chat: ChatModel | None, config: AnswerConfig,
                 count_tokens: Callable[[str], int], metrics: AnswerMetrics | None = None) -> None:
        self._search = search
        self._chat = chat
        self._config = config
        self._count = count_tokens
        self.metrics = metrics or AnswerMetrics()

    @property
    def chat(self) -> ChatModel | None:
        return self._chat

    async def prepare(self, knowledge_base_id: UUID, question: str, *, top_k: int,
                      filters: SearchFilters | None = None, history: Sequence[ChatMessage] = (),
                      searchable: bool = True) -> Prepared:
        started = time.perf_counter()
        question = question.strip()
        if not question:
            raise InvalidRequestError("the question is empty")
        if len(question) > self._config.max_query_chars:
            raise InvalidRequestError(f"the question is longer than {self._config.max_query_chars} characters")
        history = self._recent(history)
        query, usage = question, None
        if history and self._chat is not None:
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(self._config.max_answer_seconds):
                    reply = await self._chat.complete(rewrite_messages(question, history),
                                                      max_tokens=self._config.rewrite_max_tokens)
            except TimeoutError as exc:
                self.metrics.answers.labels(outcome="error").inc()
                raise ProviderTimeoutError(f"the language model took longer than {self._config.max_answer_seconds:g} s"
                                           " to rewrite the question") from exc
            except Exception:
                self.metrics.answers.labels(outcome="error").inc()
                raise
            query = clean_rewrite(reply.text, question, self._config.max_query_chars)
            usage = reply.usage or self._estimate(rewrite_messages(question, history), reply.text)
            self.metrics.tokens.labels(direction="in").inc(usage.prompt_tokens)
            self.metrics.tokens.labels(direction="out").inc(usage.completion_tokens)
            rewrite_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        # the search path itself: the same modes, filters (applied inside the vector query) and READY rule
        outcome = await self._search.search_outcome(knowledge_base_id, query, top_k, filters=filters) \
            if searchable else SearchOutcome([])
        results = outcome.results
        retrieval = time.perf_counter() - t1
        self.metrics.retrieval_seconds.observe(retrieval)
        passages = select_passages(results, budget_tokens=self._config.context_tokens,
                                   min_score=self._config.min_score, count_tokens=self._count)
        language = detect_language(question)
        prepared = Prepared(question=question, query=query, language=language, passages=passages, messages=None,
                            started=started, usage=usage, timing={"retrieval_seconds": round(retrieval, 4)},
                            unmatched_identifiers=outcome.unmatched_identifiers)
        if history and self._chat is not None:
            prepared.timing["rewrite_seconds"] = round(rewrite_seconds, 4)
        if not passages:
            prepared.answer, prepared.reason = NOTHING_RELEVANT[language], nothing_relevant(self._config.min_score)
        elif self._chat is None:
            prepared.reason = NO_MODEL
        else:
            prepared.messages = answer_messages(question, passages, history)
        return prepared

    async def complete(self, prepared: Prepared) -> Answer:
        async with aclosing(self.stream(prepared)) as pieces:
            async for piece in pieces:
                if isinstance(piece, Answer):
                    return piece
        raise AssertionError("the stream ends with its answer")  # pragma: no cover

    async def stream(self, prepared: Prepared, *, still_allowed: Check | None = None,
                     check_every: float = 5.0) -> AsyncGenerator[str | Answer, None]:
        """The answer's text pieces (invented citations already removed), then the ``Answer``.
        Whatever the provider does, the text stops at ``max_answer_bytes`` and the model is
        stopped after ``max_answer_seconds`` (the answer so far is kept, with the reason);
        ``still_allowed`` (a key check, every ``check_every`` seconds) ends it with
        ``AuthenticationError`` when it returns False."""
        if prepared.messages is None or self._chat is None:
            if prepared.answer:
                yield prepared.answer
            yield self._finish(prepared, prepared.answer, CitationFilter(()), None, None, None,
                               "nothing_relevant" if prepared.answer else "no_model")
            return
        check = CitationFilter([p.n for p in prepared.passages])
        text, usage, first, model_started = "", None, None, time.perf_counter()
        room = self._config.max_answer_bytes
        outcome = "cancelled"
        try:
            # closed at once when the client goes away: the provider's request is cancelled with it
            model = self._chat.stream(prepared.messages, max_tokens=self._config.max_output_tokens)
            pieces = bounded(model, seconds=self._config.max_answer_seconds, check=still_allowed,
                             check_every=check_every)

            async def checked() -> AsyncGenerator[str, None]:
                """The model's text with invented citations removed (the held-back end last)."""
                nonlocal usage
                async with aclosing(pieces):
                    async for piece in pieces:
                        if isinstance(piece, ChatUsage):
                            usage = piece
                        else:
                            yield check.feed(piece)
                yield check.flush()

            async with aclosing(checked()) as texts:
                try:
                    async for piece in texts:
                        out, room, cut = _within(piece, room)
                        if out:
                            first = first or time.perf_counter()
                            text += out
                            yield out
                        if cut:
                            prepared.reason = f"the answer was cut at {self._config.max_answer_bytes} bytes"
                            break
                except StreamDeadline:
                    prepared.reason = (f"the answer was cut after {self._config.max_answer_seconds:g} s: "
                                       "the language model was still writing")
            outcome = "answered" if prepared.reason is None else "truncated"
        except StreamRefused as exc:
            outcome = "refused"
            raise AuthenticationError("the API key was revoked or has expired") from exc
        except Exception:
            outcome = "error"
            raise
        finally:
            if outcome not in ("answered", "truncated"):
                self.metrics.answers.labels(outcome=outcome).inc()
        model_seconds = time.perf_counter() - model_started
        usage = usage or self._estimate(prepared.messages, text)
        yield self._finish(prepared, text.strip(), check, usage, first, model_seconds, outcome)

    def _finish(self, prepared: Prepared, text: str | None, check: CitationFilter, usage: ChatUsage | None,
                first: float | None, model_seconds: float | None, outcome: str) -> Answer:
        now = time.perf_counter()
        timing = dict(prepared.timing)
        if first is not None:
            timing["first_token_seconds"] = round(first - prepared.started, 4)
            self.metrics.first_token_seconds.observe(first - prepared.started)
        if model_seconds is not None:
            timing["model_seconds"] = round(model_seconds, 4)
        timing["total_seconds"] = round(now - prepared.started, 4)
        self.metrics.total_seconds.observe(now - prepared.started)
        self.metrics.answers.labels(outcome=outcome).inc()
        if usage is not None:
            self.metrics.tokens.labels(direction="in").inc(usage.prompt_tokens)
            self.metrics.tokens.labels(direction="out").inc(usage.completion_tokens)
        if prepared.usage is not None:
            usage = prepared.usage + usage if usage is not None else prepared.usage
        return Answer(prepared, text, check.cited, check.invalid, usage, timing)

    def _recent(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The latest turns that fit ``history_tokens`` (oldest dropped first)."""
        kept: list[ChatMessage] = []
        left = self._config.history_tokens
        for turn in reversed(history):
            cost = self._count(turn.content) + 4
            if cost > left:
                break
            kept.append(turn)
            left -= cost
        return kept[::-1]

    def _estimate(self, messages: Sequence[ChatMessage], text: str) -> ChatUsage:
        return ChatUsage(sum(self._count(m.content) + 4 for m in messages), self._count(text), estimated=True)


def _within(text: str, room: int) -> tuple[str, int, bool]:
    """``text`` cut to ``room`` bytes of UTF-8 (never inside a character), the room left, and
    whether it was cut."""
    data = text.encode()
    if len(data) <= room:
        return text, room - len(data), False
    return data[:max(room, 0)].decode(errors="ignore"), 0, True

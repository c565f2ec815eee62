"""Request and response shapes of ``POST /api/knowledge-bases/{kb_id}/answer`` (SPEC §10)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from ..domain.chat import ChatMessage
from ..domain.metadata import source_path
from ..services.answering import Answer
from ..services.grounding import Passage
from .schemas import Text, body_of
from .search_schemas import SOURCE_PATH, SearchFiltersIn


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: Text = Field(max_length=20_000)


class AnswerIn(BaseModel):
    """Unknown fields are refused (422), as in search: a misspelt ``filter`` must not answer over
    the whole knowledge base."""

    model_config = ConfigDict(extra="forbid")

    question: Text = Field(min_length=1)
    top_k: int = Field(default=8, ge=1)
    filters: SearchFiltersIn | None = None
    messages: list[Turn] = Field(default_factory=list, max_length=50,
                                 description="earlier turns of the conversation, oldest first")
    stream: bool = Field(default=False, description="answer as server-sent events")

    def history(self) -> list[ChatMessage]:
        return [ChatMessage(m.role, m.content) for m in self.messages]


class CitationOut(BaseModel):
    n: int
    chunk_id: UUID
    document_id: UUID
    filename: str
    source_path: str | None = SOURCE_PATH
    heading_path: list[str]
    locator: dict[str, Any]
    content: str
    score: float
    assets: list[dict[str, Any]]
    metadata: dict[str, Any] = Field(default_factory=dict, description="the document's own fields")

    @classmethod
    def of(cls, p: Passage) -> CitationOut:
        r = p.result
        return cls(n=p.n, chunk_id=r.chunk_id, document_id=r.document_id, filename=r.filename,
                   source_path=source_path(r.metadata), heading_path=list(r.heading_path),
                   locator=r.locator.to_metadata(),
                   content=r.content, score=r.score, assets=list(r.assets), metadata=r.metadata)


class UsageOut(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = Field(description="the provider reported no usage: counted here, conservatively")


class AnswerOut(BaseModel):
    answer: str | None = Field(description="null when no language model is configured (see reason)")
    citations: list[CitationOut]
    query: str = Field(description="the standalone query used for retrieval")
    language: str = Field(description="the question's language: en, zh or ko")
    cited: list[int] = Field(description="the citation numbers the answer uses")
    grounded: bool = Field(description="the answer cites at least one of the passages; false: it rests on "
                                       "nothing retrieved (no answer, nothing relevant, or the model cited none)")
    invalid_citations: list[int] = Field(description="numbers the model invented, removed from the answer")
    reason: str | None = Field(default=None, description="why the model gave no answer")
    usage: UsageOut | None = None
    timing: dict[str, float]
    unmatched_identifiers: list[str] = Field(
        default_factory=list, description="identifiers the question names that no searchable chunk holds, as "
                                          "written (the passages are then the usual search's)")

    @classmethod
    def of(cls, answer: Answer) -> AnswerOut:
        return cls(citations=citations(answer.prepared.passages), **answer.body())


def citations(passages: list[Passage]) -> list[CitationOut]:
    return [CitationOut.of(p) for p in passages]


ANSWER_RESPONSES: dict[int | str, Any] = {
    200: {"description": "the answer (JSON), or with `stream: true` server-sent events: `citations`, `delta` "
                         "(repeated), then `done` or `error`",
          "content": body_of("text/event-stream", "", {"type": "string"})[200]["content"]},
    429: {"description": "this key already runs as many searches and answers as it may (see Retry-After)"},
    502: {"description": "the language model failed (after retries), refused the request or sent a malformed "
                         "answer"},
    503: {"description": "the language model is rate limited for longer than we wait (see Retry-After)"},
    504: {"description": "the language model did not answer in time (after retries)"},
}

"""The OpenAI-compatible chat API (SPEC §10, docs/openai.md): the knowledge bases a key may read
are its models, and a chat completion is the knowledge base's grounded answer, made by the answer
service exactly as ``POST /api/knowledge-bases/{kb_id}/answer`` makes it (the same retrieval,
filters, language and no-answer rule) and bounded as it is: the retrieval counts toward the key's
searches, the answer is capped, and a stream re-checks its key (a revoked or expired key ends it
with an ``error`` object). Our API keys are the bearer tokens, with their scopes: a knowledge base
a key may not read is a model that does not exist (404)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from ...domain.auth import Principal
from ...domain.errors import AuthenticationError, ProviderError, ResourceNotFoundError
from ...domain.models import KnowledgeBase
from ...domain.ports import KnowledgeBaseStore
from ...services.answering import Answer, AnswerService
from ...services.bounded_stream import Check
from ..deps import (
    AnswersDep,
    ApiKeysDep,
    KnowledgeBasesDep,
    PrincipalDep,
    RetrievalSlotsDep,
    SettingsDep,
    principal,
    still_valid,
)
from ..openai_schemas import ChatCompletionIn, Completion, finish_reason, lead_text, model_of
from ..schemas import ERROR_RESPONSES
from ..sse import sse_data

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


async def _readable(knowledge_bases: KnowledgeBaseStore, who: Principal) -> list[KnowledgeBase]:
    return [kb for kb in await knowledge_bases.list() if who.can_read(kb.id)]


async def _model(name: str, knowledge_bases: KnowledgeBaseStore, who: Principal) -> KnowledgeBase:
    """The knowledge base a model names (its name, any case, or its id) that this key may read."""
    try:
        wanted: UUID | None = UUID(name)
    except ValueError:
        wanted = None
    for kb in await _readable(knowledge_bases, who):
        if kb.id == wanted or kb.name.casefold() == name.casefold():
            return kb
    # the name is not echoed: what a key may not see does not exist for it, in the same words
    raise ResourceNotFoundError("this model does not exist: GET /v1/models lists the knowledge bases this key "
                                "may read")


@router.get("/models")
async def list_models(knowledge_bases: KnowledgeBasesDep, who: PrincipalDep) -> dict[str, Any]:
    """The knowledge bases this key may read, as models (``id``: the knowledge base's name)."""
    return {"object": "list", "data": [model_of(kb) for kb in await _readable(knowledge_bases, who)]}


@router.get("/models/{model}")
async def get_model(model: str, knowledge_bases: KnowledgeBasesDep, who: PrincipalDep) -> dict[str, Any]:
    return model_of(await _model(model, knowledge_bases, who))


@router.post("/chat/completions", responses={200: {"description": "a chat.completion, or with stream: true "
                                                                  "server-sent chat.completion.chunk events"}})
async def chat_completions(body: ChatCompletionIn, knowledge_bases: KnowledgeBasesDep, who: PrincipalDep,
                           service: AnswersDep, slots: RetrievalSlotsDep, api_keys: ApiKeysDep,
                           settings: SettingsDep) -> Any:
    """The grounded answer of the knowledge base named by ``model``: its text ends with a numbered
    sources list, and ``citations`` lists the passages (as ``/answer`` does)."""
    kb = await _model(body.model, knowledge_bases, who)
    question, history = body.question_and_history()
    with slots.held(who.key_prefix):  # the retrieval holds database connections: the key's share of them
        prepared = await service.prepare(kb.id, question, top_k=body.top_k,
                                         filters=body.filters.to_domain() if body.filters else None,
                                         history=history, searchable=not kb.deleting)
    completion = Completion(kb, prepared)
    if not body.stream:
        return completion.whole(await service.complete(prepared))
    with_usage = bool(body.stream_options and body.stream_options.include_usage)

    async def key_still_valid() -> bool:
        return await still_valid(api_keys, settings, who)

    chunks = _chunks(service, completion, with_usage, key_still_valid, settings.event_stream_key_check_seconds)
    return StreamingResponse(chunks, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _data(payload: Any) -> str:
    """One OpenAI stream event (no event name): the JSON on one line, every line end escaped."""
    return f"data: {sse_data(payload)}\n\n"


async def _chunks(service: AnswerService, completion: Completion, with_usage: bool, key_check: Check,
                  every: float) -> AsyncIterator[str]:
    """The role and the citations first, the answer's pieces, the sources list, the end (with the
    citations again), the usage when asked, then ``[DONE]``; a provider failing after the start is
    an ``error`` object, as OpenAI streams say it. A client that disconnects cancels the provider's
    request with this generator."""
    prepared = completion.prepared
    yield _data(completion.chunk({"role": "assistant", "content": ""}, citations=completion.citations()))
    if prepared.messages is None and prepared.answer is None:  # no model: the reason, then the passages
        yield _data(completion.chunk({"content": lead_text(prepared)}))
    try:
        async for piece in service.stream(prepared, still_allowed=key_check, check_every=every):
            if not isinstance(piece, Answer):
                yield _data(completion.chunk({"content": piece}))
                continue
            tail = completion.tail(piece)
            if tail:
                yield _data(completion.chunk({"content": tail}))
            yield _data(completion.chunk({}, finish_reason(piece), citations=completion.citations(),
                                         cited=piece.cited))
            if with_usage:
                yield _data(completion.usage_chunk(piece))
    except ProviderError as exc:
        yield _data({"error": {"message": exc.message, "type": "provider_error", "code": None}})
    except AuthenticationError as exc:  # the key was revoked or expired while the answer streamed
        yield _data({"error": {"message": exc.message, "type": "invalid_request_error", "code": "invalid_api_key"}})
    except Exception:
        log.exception("a chat completion stream failed")
        yield _data({"error": {"message": "internal error", "type": "server_error", "code": None}})
    yield "data: [DONE]\n\n"

"""Grounded answers with citations (SPEC §10): JSON, or server-sent events with ``stream: true``.
Readers may ask; the search behind the answer only sees the knowledge base the key may read.

Bounded like every long request: the retrieval counts toward the key's searches at once
(``max_searches_per_key``), the answer is cut at ``llm_max_answer_bytes`` and after
``llm_max_answer_seconds``, and a streamed answer re-checks its key as ``/events`` does (every
``event_stream_key_check_seconds``): a revoked or expired key ends it with an ``error`` event."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from ...domain.errors import AuthenticationError, ProviderError
from ...services.answering import Answer, AnswerService, Prepared
from ...services.bounded_stream import Check
from ..answer_schemas import ANSWER_RESPONSES, AnswerIn, AnswerOut, citations
from ..deps import (
    AnswersDep,
    ApiKeysDep,
    PrincipalDep,
    ReadableKB,
    RetrievalSlotsDep,
    SettingsDep,
    principal,
    still_valid,
)
from ..schemas import ERROR_RESPONSES
from ..sse import sse_frame

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/knowledge-bases", tags=["answers"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


@router.post("/{kb_id}/answer", response_model=AnswerOut, responses=ANSWER_RESPONSES)
async def answer(kb: ReadableKB, body: AnswerIn, service: AnswersDep, who: PrincipalDep, slots: RetrievalSlotsDep,
                 api_keys: ApiKeysDep, settings: SettingsDep) -> Any:
    """A grounded answer with numbered citations, in the question's language (docs/answers.md).
    Nothing relevant: says so without asking the model; no model configured: the passages and
    ``answer: null``; ``stream: true``: server-sent events ``citations``, ``delta``…, ``done`` / ``error``."""
    filters = body.filters.to_domain() if body.filters else None
    with slots.held(who.key_prefix):  # the retrieval holds database connections: the key's share of them
        prepared = await service.prepare(kb.id, body.question, top_k=body.top_k, filters=filters,
                                         history=body.history(), searchable=not kb.deleting)
    if not body.stream:
        return AnswerOut.of(await service.complete(prepared))

    async def key_still_valid() -> bool:
        return await still_valid(api_keys, settings, who)

    return StreamingResponse(_events(service, prepared, key_still_valid, settings.event_stream_key_check_seconds),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _events(service: AnswerService, prepared: Prepared, key_check: Check, every: float) -> AsyncIterator[str]:
    """``citations`` first, then ``delta`` pieces, then ``done`` (the answer without its citations)
    or ``error``. A client that disconnects cancels this generator, and the provider's request."""
    yield sse_frame("citations", [c.model_dump(mode="json") for c in citations(prepared.passages)])
    try:
        async for piece in service.stream(prepared, still_allowed=key_check, check_every=every):
            if isinstance(piece, Answer):
                yield sse_frame("done", piece.body())
            else:
                yield sse_frame("delta", {"text": piece})
    except (ProviderError, AuthenticationError) as exc:
        yield sse_frame("error", {"detail": exc.message})
    except Exception:
        log.exception("an answer stream failed")
        yield sse_frame("error", {"detail": "internal error"})


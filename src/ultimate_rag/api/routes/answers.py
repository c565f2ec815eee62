"""Grounded answers with citations (SPEC §10): JSON, or server-sent events with ``stream: true``.
Readers may ask; the search behind the answer only sees the knowledge base the key may read."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from ...domain.errors import ProviderError
from ...services.answering import Answer, AnswerService, Prepared
from ..answer_schemas import ANSWER_RESPONSES, AnswerIn, AnswerOut, citations
from ..deps import AnswersDep, ReadableKB, principal
from ..schemas import ERROR_RESPONSES

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/knowledge-bases", tags=["answers"], dependencies=[Depends(principal)],
                   responses=ERROR_RESPONSES)


@router.post("/{kb_id}/answer", response_model=AnswerOut, responses=ANSWER_RESPONSES)
async def answer(kb: ReadableKB, body: AnswerIn, service: AnswersDep) -> Any:
    """A grounded answer with numbered citations, in the question's language (docs/answers.md).
    Nothing relevant: says so without asking the model; no model configured: the passages and
    ``answer: null``; ``stream: true``: server-sent events ``citations``, ``delta``…, ``done`` / ``error``."""
    filters = body.filters.to_domain() if body.filters else None
    prepared = await service.prepare(kb.id, body.question, top_k=body.top_k, filters=filters,
                                     history=body.history(), searchable=not kb.deleting)
    if not body.stream:
        return AnswerOut.of(await service.complete(prepared))
    return StreamingResponse(_events(service, prepared), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _frame(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


async def _events(service: AnswerService, prepared: Prepared) -> AsyncIterator[str]:
    """``citations`` first, then ``delta`` pieces, then ``done`` (the answer without its citations)
    or ``error``. A client that disconnects cancels this generator, and the provider's request."""
    yield _frame("citations", [c.model_dump(mode="json") for c in citations(prepared.passages)])
    try:
        async for piece in service.stream(prepared):
            if isinstance(piece, Answer):
                yield _frame("done", piece.body())
            else:
                yield _frame("delta", {"text": piece})
    except ProviderError as exc:
        yield _frame("error", {"detail": exc.message})
    except Exception:
        log.exception("an answer stream failed")
        yield _frame("error", {"detail": "internal error"})

"""The status vocabulary (``GET /api/statuses``): document and job status names, which are active
or stable, and the operations each document status allows, from ``domain/operations.py``. Clients
such as the workbench read it instead of copying names and rules from the Python code. Any valid
key may read it: it holds no data, only the rules."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from ...domain.operations import vocabulary
from ..deps import PrincipalDep
from ..schemas import ERROR_RESPONSES

router = APIRouter(prefix="/api", tags=["statuses"], responses=ERROR_RESPONSES)


class DocumentStatusOut(BaseModel):
    name: str
    active: bool  # refuses reindex, re-upload and delete (409)
    stable: bool
    running: bool  # a stage of the ingest pipeline
    working: bool  # a worker is on it (a running stage, or DELETING)
    operations: list[str]  # what a document in this status accepts; anything else answers 409


class JobStatusOut(BaseModel):
    name: str
    active: bool
    stable: bool


class StatusVocabulary(BaseModel):
    document_statuses: list[DocumentStatusOut]
    pipeline: list[str]  # the ingest stages in order, ending with READY
    job_statuses: list[JobStatusOut]
    operations: list[str]


@router.get("/statuses", response_model=StatusVocabulary)
async def statuses(_who: PrincipalDep) -> StatusVocabulary:
    """The same for every key and every knowledge base; it changes only with the installed version."""
    return StatusVocabulary(**vocabulary())

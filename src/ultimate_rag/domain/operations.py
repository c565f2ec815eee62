"""Which operations each document status allows (SPEC §6), derived from the status sets of
``status.py``, and the vocabulary the API serves to clients at ``GET /api/statuses`` so that the
workbench (and any other client) never copies status names or rules from the Python code.

The rules: an active document refuses reindex, re-upload and delete (the 409 rule), except that a
queued one (PENDING: not started, or waiting for a retry) may be deleted, which cancels what was
queued; a DELETED one can only be deleted for good (hard); fail ends any active document except one a connector is
fetching (its sync is aborted instead); recover (fail, then a forced reindex) is for a document in
a running stage."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from .errors import ConflictError
from .status import ACTIVE, PIPELINE, RUNNING, STABLE, DocumentStatus, JobStatus, sources_of

D = DocumentStatus
# a worker is on the document: a running stage of the ingest pipeline, or the delete's DELETING
WORKING: frozenset[DocumentStatus] = RUNNING | {D.DELETING}
JOB_ACTIVE: frozenset[JobStatus] = frozenset({JobStatus.PENDING, JobStatus.RUNNING})


class DocumentOperation(StrEnum):
    REINDEX = "reindex"
    UPLOAD = "upload"  # a re-upload over the document
    DELETE = "delete"  # soft
    HARD_DELETE = "hard_delete"
    FAIL = "fail"
    RECOVER = "recover"


Op = DocumentOperation

_ALLOWED_IN: dict[DocumentOperation, frozenset[DocumentStatus]] = {
    Op.REINDEX: STABLE & sources_of(D.PENDING),
    Op.UPLOAD: STABLE & sources_of(D.UPLOADING),
    # a queued document (not started, or waiting for a retry) too: its queued work is replaced by the delete
    Op.DELETE: ((STABLE - {D.DELETED}) | {D.PENDING}) & sources_of(D.PENDING),
    Op.HARD_DELETE: (STABLE | {D.PENDING}) & sources_of(D.PENDING),
    Op.FAIL: (ACTIVE - {D.FETCHING}) & sources_of(D.FAILED),
    Op.RECOVER: RUNNING & sources_of(D.FAILED),
}


def operations_of(status: DocumentStatus | str) -> frozenset[DocumentOperation]:
    """The operations a document in ``status`` accepts; any other answers 409."""
    s = DocumentStatus(status)
    return frozenset(op for op, allowed in _ALLOWED_IN.items() if s in allowed)


def allows(status: DocumentStatus | str, operation: DocumentOperation | str) -> bool:
    return DocumentStatus(status) in _ALLOWED_IN[DocumentOperation(operation)]


def statuses_allowing(operation: DocumentOperation | str) -> frozenset[DocumentStatus]:
    """Every status in which ``operation`` is accepted (what a set-based writer passes to SQL)."""
    return _ALLOWED_IN[DocumentOperation(operation)]


def refusal(status: DocumentStatus | str, operation: DocumentOperation | str) -> str | None:
    """Why a document in ``status`` refuses ``operation`` (the 409's detail), or None if it accepts it."""
    s, op = DocumentStatus(status), DocumentOperation(operation)
    if s in _ALLOWED_IN[op]:
        return None
    if op in (Op.FAIL, Op.RECOVER) and s == D.FETCHING:
        return "document is being fetched by a connector: abort the connector's sync instead"
    if op is Op.RECOVER:
        return f"only a running document can be recovered; this one is {s}"
    if op is Op.FAIL:
        return f"document is not active ({s}); there is nothing to cancel"
    if s in ACTIVE:
        return f"document is active ({s}), try again later"
    if op is Op.DELETE and s == D.DELETED:
        return "document is already deleted"
    return f"a {s} document does not accept {op}"  # pragma: no cover - every refusal is named above


def require(status: DocumentStatus | str, operation: DocumentOperation | str) -> None:
    """The 409 rule, from the table above: ``ConflictError`` unless ``status`` accepts ``operation``."""
    reason = refusal(status, operation)
    if reason is not None:
        raise ConflictError(reason)


def vocabulary() -> dict[str, Any]:
    """The status names (in the order a client lists them: intake, pipeline, delete, then the
    stable ones), their kinds and the operations each allows; the job statuses and theirs."""
    return {
        "document_statuses": [
            {"name": s.value, "active": s in ACTIVE, "stable": s in STABLE, "running": s in RUNNING,
             "working": s in WORKING, "operations": [op.value for op in Op if s in _ALLOWED_IN[op]]}
            for s in DocumentStatus],
        "pipeline": [s.value for s in PIPELINE],
        "job_statuses": [{"name": s.value, "active": s in JOB_ACTIVE, "stable": s not in JOB_ACTIVE}
                         for s in JobStatus],
        "operations": [op.value for op in Op],
    }

"""The two state machines of SPEC §4, and the one place that decides which transitions exist."""

from __future__ import annotations

import itertools
from enum import StrEnum

from .errors import InvalidTransitionError


class DocumentStatus(StrEnum):
    UPLOADING = "UPLOADING"
    FETCHING = "FETCHING"
    PENDING = "PENDING"
    PARSING = "PARSING"
    CHUNKING = "CHUNKING"
    EMBEDDING = "EMBEDDING"
    INDEXING = "INDEXING"
    DELETING = "DELETING"
    READY = "READY"
    FAILED = "FAILED"
    DELETED = "DELETED"
    OUTDATED = "OUTDATED"

    @property
    def is_active(self) -> bool:
        return self not in STABLE

    @property
    def is_running(self) -> bool:
        return self in RUNNING


class JobStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class JobOperation(StrEnum):
    INGEST = "ingest"
    DELETE = "delete"


D = DocumentStatus

STABLE: frozenset[DocumentStatus] = frozenset({D.READY, D.FAILED, D.DELETED, D.OUTDATED})
RUNNING: frozenset[DocumentStatus] = frozenset({D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING})
ACTIVE: frozenset[DocumentStatus] = frozenset(DocumentStatus) - STABLE
PIPELINE: tuple[DocumentStatus, ...] = (D.PENDING, D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING, D.READY)


def is_active(status: DocumentStatus | str) -> bool:
    """Active documents refuse upload-over, delete and reindex (the 409 rule, SPEC §6)."""
    return DocumentStatus(status) in ACTIVE


def _allowed() -> frozenset[tuple[DocumentStatus, DocumentStatus]]:
    edges: set[tuple[DocumentStatus, DocumentStatus]] = set()
    # intake
    edges |= {(D.FETCHING, D.PENDING), (D.FETCHING, D.FAILED), (D.UPLOADING, D.PENDING)}
    edges |= {(s, D.UPLOADING) for s in STABLE}
    # an abandoned re-upload (the API died or its commit failed before the new bytes were recorded)
    # goes back to the stable status it came from, with its previous revision (RESTORABLE_FROM_UPLOAD)
    edges |= {(D.UPLOADING, s) for s in STABLE}
    # the pipeline, one stage after the other
    edges |= set(itertools.pairwise(PIPELINE))
    for stage in RUNNING:
        edges |= {(stage, D.PENDING), (stage, D.FAILED), (stage, D.OUTDATED)}
    # deduplication (SPEC §8): an indexed document is outdated when a newer duplicate is indexed
    edges.add((D.READY, D.OUTDATED))
    # reindex (restores a DELETED document) and delete, both queued through PENDING
    edges |= {(s, D.PENDING) for s in STABLE}
    edges |= {(D.PENDING, D.DELETING), (D.DELETING, D.DELETED), (D.DELETING, D.PENDING)}
    # operator fail (and permanent failure of a queued or deleting job)
    edges |= {(D.UPLOADING, D.FAILED), (D.PENDING, D.FAILED), (D.DELETING, D.FAILED)}
    return frozenset(edges)


ALLOWED_TRANSITIONS = _allowed()
# where an UPLOADING document whose new bytes never committed may return (checked inside SQL too)
RESTORABLE_FROM_UPLOAD: frozenset[DocumentStatus] = frozenset(
    t for cur, t in ALLOWED_TRANSITIONS if cur == D.UPLOADING and t in STABLE)


def sources_of(target: DocumentStatus | str) -> frozenset[DocumentStatus]:
    """Every status a document may be in to move to ``target`` (for checks done inside SQL)."""
    tgt = DocumentStatus(target)
    found = {cur for cur, t in ALLOWED_TRANSITIONS if t == tgt}
    if tgt in RUNNING or tgt == D.PENDING:
        found.add(tgt)
    return frozenset(found)


def check_transition(current: DocumentStatus | str, target: DocumentStatus | str) -> DocumentStatus:
    """Return ``target`` if ``current -> target`` is allowed by SPEC §4, else raise.

    Staying in the same status is not a transition and is refused too, except for the
    running stages and PENDING, where a repeated write (a retry re-entering the stage it
    crashed in, a reset queue entry) is harmless and idempotent.
    """
    cur, tgt = DocumentStatus(current), DocumentStatus(target)
    if cur == tgt and (cur in RUNNING or cur == D.PENDING):
        return tgt
    if (cur, tgt) not in ALLOWED_TRANSITIONS:
        raise InvalidTransitionError(f"document cannot go from {cur} to {tgt}")
    return tgt

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
    IDLE = "IDLE"  # a connector's document still being fetched: nothing to run until its bytes are stored
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


# an expired re-upload goes back to the stable status it came from, or FAILED: the statuses it
# may do that from are those that may move to every one of them (UPLOADING)
UPLOAD_RESTORE_SOURCES: frozenset[DocumentStatus] = frozenset.intersection(
    *(sources_of(t) for t in RESTORABLE_FROM_UPLOAD | {D.FAILED}))


# a document whose bytes are still arriving: a connector's fetch (new item) or a re-upload
INTAKE: frozenset[DocumentStatus] = frozenset({D.FETCHING, D.UPLOADING})
# an intake that did not finish (a sync ended or failed with the item still on its way) fails it
INTAKE_FAILURE_SOURCES: frozenset[DocumentStatus] = sources_of(D.FAILED) & INTAKE
# documents deduplication may match (SPEC §8): those a newer twin may outdate, minus intake (an
# abandoned re-upload returning to OUTDATED is a restore, not a verdict)
DEDUP_MATCHABLE: frozenset[DocumentStatus] = sources_of(D.OUTDATED) - INTAKE


def names(statuses: frozenset[DocumentStatus] | frozenset[JobStatus]) -> list[str]:
    """Status names, sorted, as a SQL writer's ``= ANY(%(sources)s)`` parameter."""
    return sorted(s.value for s in statuses)


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


# -- jobs ------------------------------------------------------------------------------------------
J = JobStatus

# the status a job is created in: PENDING for an upload, IDLE for a connector's new item
JOB_INITIAL: frozenset[JobStatus] = frozenset({J.PENDING, J.IDLE})
JOB_FINISHED: frozenset[JobStatus] = frozenset({J.SUCCEEDED, J.FAILED})


def _job_allowed() -> frozenset[tuple[JobStatus, JobStatus]]:
    edges: set[tuple[JobStatus, JobStatus]] = set()
    # a connector's item: its bytes stored (queued) or its fetch failed
    edges |= {(J.IDLE, J.PENDING), (J.IDLE, J.FAILED)}
    # the claim; a run ends, is retried or handed back
    edges |= {(J.PENDING, J.RUNNING), (J.RUNNING, J.SUCCEEDED), (J.RUNNING, J.FAILED), (J.RUNNING, J.PENDING)}
    # operator fail, or attempts exhausted while queued
    edges.add((J.PENDING, J.FAILED))
    # reindex, delete, a finished re-upload: the single job is queued again
    edges |= {(s, J.PENDING) for s in JOB_FINISHED}
    # a re-upload (or refetch) whose intake failed ends the document's job FAILED again
    edges |= {(s, J.FAILED) for s in JOB_FINISHED}
    # deduplication outdating an indexed twin ends its (finished) job again, as SUCCEEDED
    edges.add((J.SUCCEEDED, J.SUCCEEDED))
    return frozenset(edges)


JOB_TRANSITIONS = _job_allowed()


def job_sources_of(target: JobStatus | str) -> frozenset[JobStatus]:
    """Every status a job may be in to move to ``target`` (for checks done inside SQL). A queued
    job may be queued again and a running one re-claimed when its lease expired."""
    tgt = JobStatus(target)
    found = {cur for cur, t in JOB_TRANSITIONS if t == tgt}
    if tgt in (J.PENDING, J.RUNNING):
        found.add(tgt)
    return frozenset(found)


def check_job_transition(current: JobStatus | str, target: JobStatus | str) -> JobStatus:
    cur, tgt = JobStatus(current), JobStatus(target)
    if cur not in job_sources_of(tgt):
        raise InvalidTransitionError(f"job cannot go from {cur} to {tgt}")
    return tgt

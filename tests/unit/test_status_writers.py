"""Both transition tables, and every set-based writer that takes its source statuses from them: a
writer's source set is exactly what the table allows, so no SQL can move a document or a job
along an edge the table does not hold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ultimate_rag.domain.errors import InvalidTransitionError
from ultimate_rag.domain.status import (
    ALLOWED_TRANSITIONS,
    DEDUP_MATCHABLE,
    INTAKE,
    INTAKE_FAILURE_SOURCES,
    JOB_INITIAL,
    JOB_TRANSITIONS,
    DocumentStatus,
    JobStatus,
    check_job_transition,
    check_transition,
    job_sources_of,
    sources_of,
)

D = DocumentStatus
J = JobStatus

# every set-based writer that takes its sources from the tables: (target, sources it passes to SQL)
DOCUMENT_WRITERS = {
    "connectors.sql fail_left_in_intake": (D.FAILED, INTAKE_FAILURE_SOURCES),
    "dedup candidates (may be outdated)": (D.OUTDATED, DEDUP_MATCHABLE),
}
JOB_WRITERS = {
    "connectors.sql fail_left_in_intake": (J.FAILED, job_sources_of(J.FAILED)),
    "connector_syncs fail_item": (J.FAILED, job_sources_of(J.FAILED)),
    "dedup.sql end_outdated_job": (J.SUCCEEDED, job_sources_of(J.SUCCEEDED)),
}


@pytest.mark.parametrize("name", sorted(DOCUMENT_WRITERS))
def test_document_writers_take_only_allowed_sources(name: str) -> None:
    target, sources = DOCUMENT_WRITERS[name]
    assert sources and sources <= sources_of(target)
    for source in sources:
        check_transition(source, target)


@pytest.mark.parametrize("name", sorted(JOB_WRITERS))
def test_job_writers_take_only_allowed_sources(name: str) -> None:
    target, sources = JOB_WRITERS[name]
    assert sources and sources <= job_sources_of(target)


def test_writer_sets_are_the_intended_slices_of_the_table() -> None:
    assert INTAKE_FAILURE_SOURCES == {D.FETCHING, D.UPLOADING} == INTAKE
    # indexed documents and those on their way: never one still arriving, queued or stable otherwise
    assert DEDUP_MATCHABLE == {D.READY, D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING}


@given(st.sampled_from(list(DocumentStatus)), st.sampled_from(list(DocumentStatus)))
def test_document_sources_of_agrees_with_check_transition(cur: D, tgt: D) -> None:
    allowed = cur in sources_of(tgt)
    try:
        check_transition(cur, tgt)
        passed = True
    except InvalidTransitionError:
        passed = False
    assert allowed == passed
    if cur != tgt:
        assert allowed == ((cur, tgt) in ALLOWED_TRANSITIONS)


@given(st.sampled_from(list(JobStatus)), st.sampled_from(list(JobStatus)))
def test_job_sources_of_agrees_with_check_job_transition(cur: J, tgt: J) -> None:
    allowed = cur in job_sources_of(tgt)
    try:
        check_job_transition(cur, tgt)
        passed = True
    except InvalidTransitionError:
        passed = False
    assert allowed == passed


def test_an_idle_job_is_never_claimed_and_leaves_only_to_queued_or_failed() -> None:
    assert J.IDLE not in job_sources_of(J.RUNNING)  # the claim takes PENDING (and expired RUNNING)
    assert job_sources_of(J.RUNNING) == {J.PENDING, J.RUNNING}
    assert {t for c, t in JOB_TRANSITIONS if c == J.IDLE} == {J.PENDING, J.FAILED}
    assert J.IDLE not in {t for _, t in JOB_TRANSITIONS}  # only created idle, never made idle
    assert JOB_INITIAL == {J.PENDING, J.IDLE}


def test_job_table_holds_the_queue_lifecycle() -> None:
    for edge in [(J.PENDING, J.RUNNING), (J.RUNNING, J.SUCCEEDED), (J.RUNNING, J.FAILED), (J.RUNNING, J.PENDING),
                 (J.PENDING, J.FAILED), (J.SUCCEEDED, J.PENDING), (J.FAILED, J.PENDING)]:
        assert edge in JOB_TRANSITIONS
    for refused in [(J.SUCCEEDED, J.RUNNING), (J.FAILED, J.RUNNING), (J.PENDING, J.SUCCEEDED), (J.IDLE, J.RUNNING)]:
        with pytest.raises(InvalidTransitionError):
            check_job_transition(*refused)

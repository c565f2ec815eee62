"""The state machine of SPEC §4: every listed transition is allowed, everything else refused."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ultimate_rag.domain.errors import ConflictError, InvalidTransitionError
from ultimate_rag.domain.status import (
    ACTIVE,
    ALLOWED_TRANSITIONS,
    RUNNING,
    STABLE,
    DocumentStatus,
    JobStatus,
    check_transition,
    is_active,
)

D = DocumentStatus

SPEC_TRANSITIONS = {
    # new upload / connector / re-upload
    (D.FETCHING, D.PENDING), (D.FETCHING, D.FAILED), (D.UPLOADING, D.PENDING),
    (D.READY, D.UPLOADING), (D.FAILED, D.UPLOADING), (D.OUTDATED, D.UPLOADING), (D.DELETED, D.UPLOADING),
    # the pipeline
    (D.PENDING, D.PARSING), (D.PARSING, D.CHUNKING), (D.CHUNKING, D.EMBEDDING), (D.EMBEDDING, D.INDEXING),
    (D.INDEXING, D.READY),
    # reindex and delete queueing
    (D.READY, D.PENDING), (D.FAILED, D.PENDING), (D.OUTDATED, D.PENDING), (D.DELETED, D.PENDING),
    (D.PENDING, D.DELETING), (D.DELETING, D.DELETED),
    # operator fail
    (D.UPLOADING, D.FAILED), (D.PENDING, D.FAILED), (D.DELETING, D.FAILED),
} | {(s, t) for s in RUNNING for t in (D.PENDING, D.FAILED, D.OUTDATED)}


def test_twelve_statuses_and_five_job_statuses() -> None:
    assert len(DocumentStatus) == 12
    assert [s.value for s in JobStatus] == ["IDLE", "PENDING", "RUNNING", "SUCCEEDED", "FAILED"]


def test_active_and_stable_partition() -> None:
    assert STABLE == {D.READY, D.FAILED, D.DELETED, D.OUTDATED}
    assert ACTIVE | STABLE == set(DocumentStatus) and not (ACTIVE & STABLE)
    assert all(is_active(s) for s in (D.UPLOADING, D.FETCHING, D.PENDING, D.PARSING, D.DELETING))
    assert not any(is_active(s) for s in STABLE)
    assert is_active("INDEXING")


@pytest.mark.parametrize(("current", "target"), sorted(SPEC_TRANSITIONS))
def test_every_spec_transition_is_allowed(current: D, target: D) -> None:
    assert check_transition(current, target) is target


def test_the_table_holds_nothing_beyond_the_spec() -> None:
    # the extra edges: a failed delete goes back to PENDING for its retry, (SPEC §8) an indexed
    # document becomes OUTDATED when a newer duplicate of it is indexed, and an abandoned re-upload
    # goes back to the stable status it came from
    assert ALLOWED_TRANSITIONS - SPEC_TRANSITIONS == {(D.DELETING, D.PENDING), (D.READY, D.OUTDATED),
                                                      (D.UPLOADING, D.READY), (D.UPLOADING, D.DELETED),
                                                      (D.UPLOADING, D.OUTDATED)}


@pytest.mark.parametrize(("current", "target"), [
    (D.PENDING, D.READY), (D.PARSING, D.EMBEDDING), (D.READY, D.PARSING), (D.FAILED, D.READY),
    (D.DELETED, D.READY), (D.UPLOADING, D.PARSING), (D.FETCHING, D.PARSING), (D.READY, D.DELETED),
    (D.INDEXING, D.DELETING), (D.OUTDATED, D.READY), (D.READY, D.READY), (D.FAILED, D.FAILED),
    (D.PENDING, D.OUTDATED), (D.FAILED, D.OUTDATED),
])
def test_refused_transitions_raise(current: D, target: D) -> None:
    with pytest.raises(InvalidTransitionError):
        check_transition(current, target)


def test_refusal_is_a_conflict_with_a_readable_message() -> None:
    with pytest.raises(ConflictError, match="cannot go from READY to PARSING"):
        check_transition(D.READY, D.PARSING)


@given(st.sampled_from(list(DocumentStatus)), st.sampled_from(list(DocumentStatus)))
def test_check_transition_agrees_with_the_table(current: D, target: D) -> None:
    allowed = (current, target) in ALLOWED_TRANSITIONS or (current == target and (current in RUNNING or current == D.PENDING))
    if allowed:
        assert check_transition(current, target) == target
    else:
        with pytest.raises(InvalidTransitionError):
            check_transition(current, target)


@given(st.lists(st.sampled_from(list(DocumentStatus)), min_size=1, max_size=30))
def test_a_stable_document_reaches_ready_only_through_the_whole_pipeline(path: list[D]) -> None:
    """Any walk of allowed transitions that ends in READY passed INDEXING right before it — or is an
    abandoned re-upload going back to the READY revision it never touched (UPLOADING -> READY; the
    restore returns only to the status recorded when the upload began)."""
    current = D.READY
    walk = [current]
    for target in path:
        try:
            current = check_transition(current, target)
        except InvalidTransitionError:
            continue
        walk.append(current)
    for before, after in itertools.pairwise(walk):
        if after == D.READY and before != D.READY:
            assert before in (D.INDEXING, D.UPLOADING)

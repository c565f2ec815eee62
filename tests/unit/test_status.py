"""The state machine of SPEC §4, checked against the spec and not against itself.

The spec's model below is written from SPEC §4's text (its status table and its list of
transitions, one line each, in the spec's words), never from ``ALLOWED_TRANSITIONS``; the few
edges the code adds beyond that list are named one by one with the rule that makes them. Every
pair of statuses is then checked both ways, and the properties the rules imply (status before
action, READY as the commit flag, no dead ends) are checked over random walks of the table.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ultimate_rag.domain.errors import ConflictError, InvalidTransitionError
from ultimate_rag.domain.status import (
    ACTIVE,
    ALLOWED_TRANSITIONS,
    PIPELINE,
    RESTORABLE_FROM_UPLOAD,
    RUNNING,
    STABLE,
    DocumentStatus,
    JobStatus,
    check_transition,
    is_active,
    sources_of,
)

D = DocumentStatus
ALL = list(DocumentStatus)

# -- the spec, transcribed ----------------------------------------------------------------------

# SPEC §4's status table: the "active?" column, status by status
SPEC_ACTIVE = {"UPLOADING": True, "FETCHING": True, "PENDING": True, "PARSING": True, "CHUNKING": True,
               "EMBEDDING": True, "INDEXING": True, "DELETING": True,
               "READY": False, "FAILED": False, "DELETED": False, "OUTDATED": False}
SPEC_STABLE = {D(name) for name, active in SPEC_ACTIVE.items() if not active}
# "PARSING..INDEXING together are what the Korean note calls running"
SPEC_RUNNING = {D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING}


def _spec_edges() -> set[tuple[D, D]]:
    """SPEC §4 "Transitions (anything not listed is refused)", line by line."""
    edges: set[tuple[D, D]] = set()
    # connector discovery -> FETCHING -> PENDING | FAILED
    edges |= {(D.FETCHING, D.PENDING), (D.FETCHING, D.FAILED)}
    # re-upload of a stable document -> UPLOADING -> PENDING
    edges |= {(s, D.UPLOADING) for s in SPEC_STABLE} | {(D.UPLOADING, D.PENDING)}
    # PENDING -> PARSING -> CHUNKING -> EMBEDDING -> INDEXING -> READY
    edges |= set(itertools.pairwise([D.PENDING, D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING, D.READY]))
    # any running stage -> PENDING (retry) | FAILED | OUTDATED (dedup verdict)
    edges |= {(s, t) for s in SPEC_RUNNING for t in (D.PENDING, D.FAILED, D.OUTDATED)}
    # READY | FAILED | OUTDATED | DELETED -> PENDING (reindex)
    edges |= {(s, D.PENDING) for s in (D.READY, D.FAILED, D.OUTDATED, D.DELETED)}
    # any stable -> PENDING (delete queued) -> DELETING -> DELETED
    edges |= {(s, D.PENDING) for s in SPEC_STABLE} | {(D.PENDING, D.DELETING), (D.DELETING, D.DELETED)}
    # UPLOADING | PENDING | running | DELETING -> FAILED (operator fail)
    edges |= {(s, D.FAILED) for s in {D.UPLOADING, D.PENDING, D.DELETING} | SPEC_RUNNING}
    return edges


SPEC_EDGES = _spec_edges()
# beyond the list, each with the rule that needs it
DOCUMENTED_EXTRAS = {
    (D.DELETING, D.PENDING): "a delete that failed transiently is queued again for its retry (§4 failure handling)",
    (D.READY, D.OUTDATED): "an indexed document is outdated when a newer duplicate is indexed (§8)",
    # an abandoned re-upload goes back to the stable status it came from, previous revision intact (rule 3)
    **{(D.UPLOADING, s): "an abandoned re-upload returns to where it came from (rule 3)" for s in SPEC_STABLE},
}
# staying put is no transition, except where a repeated write is harmless: a retry re-entering the
# stage it crashed in, a queue entry reset (status before action, rule 1)
SPEC_REPEATS = {(s, s) for s in SPEC_RUNNING | {D.PENDING}}
SPEC_ALLOWED = SPEC_EDGES | set(DOCUMENTED_EXTRAS) | SPEC_REPEATS


def allowed(current: D, target: D) -> bool:
    try:
        return check_transition(current, target) is target
    except InvalidTransitionError:
        return False


# -- the table against the spec -------------------------------------------------------------------

def test_statuses_are_the_spec_ones() -> None:
    assert {s.value for s in DocumentStatus} == set(SPEC_ACTIVE)
    assert [s.value for s in JobStatus] == ["IDLE", "PENDING", "RUNNING", "SUCCEEDED", "FAILED"]


@pytest.mark.parametrize("status", ALL)
def test_active_stable_and_running_are_the_spec_columns(status: D) -> None:
    active = SPEC_ACTIVE[status.value]
    assert is_active(status) is active and is_active(status.value) is active and status.is_active is active
    assert (status in ACTIVE) is active and (status in STABLE) is (not active)
    assert (status in RUNNING) is (status in SPEC_RUNNING) and status.is_running is (status in SPEC_RUNNING)


def test_the_pipeline_is_the_spec_order() -> None:
    assert PIPELINE == (D.PENDING, D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING, D.READY)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(ALL, ALL)))
def test_every_pair_is_allowed_exactly_when_the_spec_allows_it(current: D, target: D) -> None:
    if (current, target) in SPEC_ALLOWED:
        assert check_transition(current, target) is target
        assert check_transition(current.value, target.value) is target  # the strings SQL rows hold
    else:
        with pytest.raises(InvalidTransitionError, match=f"cannot go from {current} to {target}"):
            check_transition(current, target)


def test_the_table_holds_the_spec_list_and_only_the_documented_extras() -> None:
    assert SPEC_EDGES <= ALLOWED_TRANSITIONS
    assert ALLOWED_TRANSITIONS - SPEC_EDGES == set(DOCUMENTED_EXTRAS) - SPEC_EDGES


@pytest.mark.parametrize("target", ALL)
def test_sources_of_names_exactly_the_statuses_allowed_to_move_there(target: D) -> None:
    """SQL writers take their allowed source statuses from ``sources_of``: it must agree with the
    check the Python writers make, or the two kinds of writers follow different rules."""
    assert sources_of(target) == {s for s in ALL if allowed(s, target)}
    assert sources_of(target.value) == sources_of(target)


def test_an_abandoned_upload_may_return_to_every_stable_status_and_nowhere_else_active() -> None:
    assert RESTORABLE_FROM_UPLOAD == SPEC_STABLE


def test_refusal_is_a_conflict_with_a_readable_message() -> None:
    with pytest.raises(ConflictError, match="cannot go from READY to PARSING"):
        check_transition(D.READY, D.PARSING)


# -- properties of walks over the table ------------------------------------------------------------

def walk(start: D, targets: list[D]) -> list[D]:
    """The statuses a document passes through when each target is tried in turn (refused ones skipped)."""
    path = [start]
    for target in targets:
        if allowed(path[-1], target):
            path.append(target)
    return path


WALKS = given(st.sampled_from(ALL), st.lists(st.sampled_from(ALL), min_size=1, max_size=40))


@WALKS
def test_ready_is_reached_only_after_indexing_or_by_restoring_an_untouched_revision(start: D, targets: list[D]) -> None:
    """Rule 2 (READY is the commit flag): READY is entered from INDEXING, or from UPLOADING when a
    re-upload that never committed returns to its READY revision."""
    for before, after in itertools.pairwise(walk(start, targets)):
        if after == D.READY and before != D.READY:
            assert before in (D.INDEXING, D.UPLOADING)


@WALKS
def test_each_running_stage_is_entered_from_the_one_before_it(start: D, targets: list[D]) -> None:
    """Rule 1 (status before action): no stage is skipped; a repeat of the same stage is a retry."""
    previous = dict(itertools.pairwise(PIPELINE))
    entered_from = {after: before for before, after in previous.items()}
    for before, after in itertools.pairwise(walk(start, targets)):
        if after in SPEC_RUNNING and before != after:
            assert before == entered_from[after]


@WALKS
def test_deleted_and_outdated_are_entered_only_as_the_spec_says(start: D, targets: list[D]) -> None:
    for before, after in itertools.pairwise(walk(start, targets)):
        if after == D.DELETED and before != D.DELETED:
            assert before in (D.DELETING, D.UPLOADING)
        if after == D.OUTDATED and before != D.OUTDATED:
            assert before in SPEC_RUNNING | {D.READY, D.UPLOADING}


@pytest.mark.parametrize("status", ALL)
def test_no_status_is_a_dead_end(status: D) -> None:
    """From anywhere a document can reach a stable status, and a stable document can be worked on
    again (reindex or re-upload): nothing is stuck for good."""
    reachable, frontier = {status}, [status]
    while frontier:
        current = frontier.pop()
        for target in ALL:
            if target not in reachable and allowed(current, target):
                reachable.add(target)
                frontier.append(target)
    assert reachable & SPEC_STABLE
    assert D.READY in reachable and D.DELETED in reachable

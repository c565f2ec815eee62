"""The operations table (domain/operations.py) against the transition table it is derived from:
every operation it allows is a transition status.py allows, and the 409 rule of SPEC §6 holds."""

from __future__ import annotations

import re

import pytest

from ultimate_rag.domain.errors import ConflictError
from ultimate_rag.domain.operations import DocumentOperation as Op
from ultimate_rag.domain.operations import allows, operations_of, refusal, require, statuses_allowing, vocabulary
from ultimate_rag.domain.status import ALLOWED_TRANSITIONS, RUNNING, STABLE, DocumentStatus, JobStatus

D = DocumentStatus
TARGET = {Op.REINDEX: D.PENDING, Op.DELETE: D.PENDING, Op.HARD_DELETE: D.PENDING, Op.UPLOAD: D.UPLOADING,
          Op.FAIL: D.FAILED, Op.RECOVER: D.FAILED}


def test_every_allowed_operation_is_an_allowed_transition() -> None:
    for status in DocumentStatus:
        for op in operations_of(status):
            # a queued document's delete queues it again: PENDING stays PENDING (check_transition allows it)
            requeued = status == TARGET[op] == D.PENDING
            assert (status, TARGET[op]) in ALLOWED_TRANSITIONS or requeued, (status, op)


def test_active_documents_refuse_reindex_upload_and_delete_and_stable_ones_refuse_fail() -> None:
    for status in DocumentStatus:
        ops = operations_of(status)
        if status in STABLE:
            assert {Op.REINDEX, Op.UPLOAD, Op.HARD_DELETE} <= ops and not ops & {Op.FAIL, Op.RECOVER}, status
        elif status == D.PENDING:  # queued (not started, or waiting for a retry): the delete replaces it
            assert not ops & {Op.REINDEX, Op.UPLOAD} and {Op.DELETE, Op.HARD_DELETE} <= ops
        else:
            assert not ops & {Op.REINDEX, Op.UPLOAD, Op.DELETE, Op.HARD_DELETE}, status
    assert not allows(D.DELETED, Op.DELETE) and allows(D.DELETED, Op.HARD_DELETE)
    assert operations_of(D.FETCHING) == frozenset()  # a connector's fetch is aborted through its sync
    assert {s for s in DocumentStatus if allows(s, Op.RECOVER)} == RUNNING
    assert allows(D.DELETING, Op.FAIL) and allows(D.UPLOADING, Op.FAIL) and allows(D.PENDING, Op.FAIL)


def test_the_vocabulary_lists_every_status_once_with_its_kind() -> None:
    v = vocabulary()
    names = [s["name"] for s in v["document_statuses"]]
    assert names == [s.value for s in DocumentStatus]
    for entry in v["document_statuses"]:
        s = D(entry["name"])
        assert entry["stable"] == (s in STABLE) and entry["active"] == (s not in STABLE)
        assert entry["running"] == (s in RUNNING)
        assert entry["working"] == (s in RUNNING or s == D.DELETING)
        assert set(entry["operations"]) == {op.value for op in operations_of(s)}
    assert [j["name"] for j in v["job_statuses"]] == [s.value for s in JobStatus]
    assert {j["name"] for j in v["job_statuses"] if j["active"]} == {"PENDING", "RUNNING"}
    assert v["pipeline"][-1] == "READY" and v["operations"] == [op.value for op in Op]


def test_the_409_rule_and_its_reasons_come_from_the_same_table() -> None:
    for status in DocumentStatus:
        for op in Op:
            reason = refusal(status, op)
            assert (reason is None) == allows(status, op) == (status in statuses_allowing(op)), (status, op)
            if reason is None:
                require(status, op)
            else:
                with pytest.raises(ConflictError, match=re.escape(reason)):
                    require(status, op)
    assert refusal(D.PARSING, Op.REINDEX) == "document is active (PARSING), try again later"
    assert refusal(D.DELETED, Op.DELETE) == "document is already deleted"
    assert refusal(D.READY, Op.FAIL) == "document is not active (READY); there is nothing to cancel"
    assert refusal(D.PENDING, Op.RECOVER) == "only a running document can be recovered; this one is PENDING"
    assert "abort the connector's sync" in (refusal(D.FETCHING, Op.FAIL) or "")

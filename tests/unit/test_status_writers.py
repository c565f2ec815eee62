"""Both transition tables, and every set-based writer that takes its source statuses from them: a
writer's source set is exactly what the table allows, so no SQL can move a document or a job
along an edge the table does not hold. The writers of the queue's claim, the lifecycle and the
knowledge-base deletion are run against a recording connection: what they pass is what is checked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, cast
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ultimate_rag.adapters.postgres import documents, lifecycle
from ultimate_rag.adapters.postgres.lifecycle import (
    KnowledgeBaseDeletionRepository,
    LifecycleRepository,
    LockedSession,
)
from ultimate_rag.adapters.postgres.queue import JobQueue
from ultimate_rag.domain.errors import InvalidTransitionError
from ultimate_rag.domain.operations import DocumentOperation, statuses_allowing
from ultimate_rag.domain.ports import LockedDocument
from ultimate_rag.domain.status import (
    ALLOWED_TRANSITIONS,
    DEDUP_MATCHABLE,
    INTAKE,
    INTAKE_FAILURE_SOURCES,
    JOB_INITIAL,
    JOB_TRANSITIONS,
    RESTORABLE_FROM_UPLOAD,
    UPLOAD_RESTORE_SOURCES,
    DocumentStatus,
    JobOperation,
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


# -- writers run against a recording connection: the status parameters they pass -------------------
class Recorder:
    """A connection and a pool at once: records each statement with its parameters, returns no rows
    (a batch loop ends at once; a bulk reindex's start gets a timestamp)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def execute(self, query: Any, params: Any = None) -> Recorder:
        self.calls.append((str(query), dict(params or {})))
        return self

    async def fetchone(self, query: Any = None, params: Any = None) -> dict[str, Any] | None:
        if query is None:  # a cursor's fetchone
            return None
        await self.execute(query, params)
        return {"rebuild_started_at": datetime.now(UTC)} if "rebuild_started_at = clock" in str(query) else None

    def sent(self, statement: str) -> dict[str, Any]:
        [params] = [p for q, p in self.calls if q == statement]
        return params


async def _claim(rec: Recorder) -> dict[str, Any]:
    return JobQueue(cast(Any, rec), lease_seconds=30).claim_params("worker", 4)


async def _reset_job(rec: Recorder) -> dict[str, Any]:
    await documents.reset_job(cast(Any, rec), uuid4(), operation="ingest", force=False, max_attempts=3)
    return rec.sent(documents.Q["reset_job"])


def _session(rec: Recorder, status: DocumentStatus) -> LockedSession:
    return LockedSession(cast(Any, rec), uuid4(), LockedDocument(status, uuid4(), "k", 1), max_attempts=3,
                         upload_lease_seconds=60)


async def _cancel(rec: Recorder) -> dict[str, Any]:
    await _session(rec, DocumentStatus.PARSING).cancel("stop")
    return rec.sent(lifecycle.Q["cancel_job"])


async def _bulk_reindex(rec: Recorder) -> dict[str, Any]:
    await LifecycleRepository(cast(Any, rec), max_attempts=3).bulk_queue(
        uuid4(), statuses=frozenset({DocumentStatus.READY}), accepted=statuses_allowing(DocumentOperation.REINDEX),
        current_parsers=None)
    return rec.sent(lifecycle.Q["queue_batch"])


async def _kb_delete(rec: Recorder) -> dict[str, Any]:
    await KnowledgeBaseDeletionRepository(cast(Any, rec), max_attempts=3).queue_document_deletes(uuid4())
    return rec.sent(lifecycle.Q["queue_batch"])


J_ = job_sources_of
# writer -> (how to run it, {its status parameter: the sources the tables allow})
RECORDED_WRITERS: dict[str, tuple[Callable[[Recorder], Awaitable[dict[str, Any]]], dict[str, frozenset[Any]]]] = {
    "queue.sql claim": (_claim, {
        "job_succeed_from": J_(J.SUCCEEDED), "job_fail_from": J_(J.FAILED), "job_retry_from": J_(J.PENDING),
        "fail_from": sources_of(D.FAILED), "retry_from": sources_of(D.PENDING),
        # an expired re-upload returns to any restorable status, or FAILED: it must be free to reach each
        "upload_restore_from": frozenset.intersection(*(sources_of(t) for t in {*RESTORABLE_FROM_UPLOAD, D.FAILED})),
    }),
    "documents.sql reset_job": (_reset_job, {"job_from": J_(J.PENDING)}),
    "lifecycle.sql cancel_job": (_cancel, {"job_from": J_(J.FAILED)}),
    "lifecycle.sql queue_batch (bulk reindex)": (_bulk_reindex, {
        "from_statuses": sources_of(D.PENDING), "job_from": J_(J.PENDING),
        "accepted": statuses_allowing(DocumentOperation.REINDEX)}),
    "lifecycle.sql queue_batch (knowledge base delete)": (_kb_delete, {
        "from_statuses": sources_of(D.PENDING), "job_from": J_(J.PENDING), "accepted": frozenset(D)}),
}


@pytest.mark.parametrize("name", sorted(RECORDED_WRITERS))
async def test_each_writer_passes_exactly_the_sources_the_tables_allow(name: str) -> None:
    run, expected = RECORDED_WRITERS[name]
    params = await run(Recorder())
    for key, sources in expected.items():
        assert sources, (name, key)
        assert sorted(params[key]) == sorted(s.value for s in sources), (name, key)


def test_what_the_claim_selects_literally_lies_inside_the_sources_it_passes() -> None:
    """The claim selects rows by literal statuses (the partial indexes' predicates): each must be a
    source of every write it feeds, or the gate would silently drop the rows it selected."""
    assert J.RUNNING in J_(J.SUCCEEDED) & J_(J.FAILED) & J_(J.PENDING)  # expired leases, converged
    assert J.PENDING in J_(J.RUNNING)  # due jobs, claimed
    assert UPLOAD_RESTORE_SOURCES == {D.UPLOADING}  # expired re-uploads, restored


def test_the_operation_a_batch_applies_is_one_the_transition_table_allows() -> None:
    assert statuses_allowing(DocumentOperation.REINDEX) <= sources_of(D.PENDING)
    assert sources_of(D.PENDING) == frozenset(D)  # a knowledge base's delete takes every document


@pytest.mark.parametrize(("status", "write"), [
    (D.READY, "cancel"), (D.FETCHING, "begin_upload"), (D.PARSING, "restore_upload")])
async def test_a_locked_document_refuses_an_edge_the_table_lacks_before_any_sql(status: D, write: str) -> None:
    rec = Recorder()
    session = _session(rec, status)
    calls = {"cancel": lambda: session.cancel("x"), "begin_upload": lambda: session.begin_upload("t"),
             "restore_upload": lambda: session.restore_upload(D.READY, None)}
    with pytest.raises(InvalidTransitionError):
        await calls[write]()
    assert rec.calls == [] and session.document.status == status


async def test_a_locked_document_follows_its_writes() -> None:
    rec = Recorder()
    session = _session(rec, D.EMBEDDING)
    await session.cancel("stop")
    await session.queue(JobOperation.INGEST, force=True, new_revision=True)
    assert session.document.status == D.PENDING
    assert rec.sent(lifecycle.Q["queue_document"])["bump"] is True


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

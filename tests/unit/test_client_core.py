"""The client's pure parts: Retry-After, the server-sent-events reader, citations, and the ingest
plan (skip what the knowledge base holds, replace what changed, add the rest)."""

from __future__ import annotations

import email.utils
import time
from pathlib import Path

import httpx
import pytest

from ultimate_rag.cli_http.plan import NEW, UNCHANGED, UPDATE, collect, plan, sha256_of
from ultimate_rag.client import Citation, Document
from ultimate_rag.client._core import RetryPolicy, SseReader, retry_after_seconds
from ultimate_rag.client.errors import ApiError, NotFound, ServerError, error_for


def test_retry_after_in_seconds_or_as_a_date_and_capped() -> None:
    assert retry_after_seconds("7") == 7.0 and retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds("-3") == 0.0 and retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    waited = retry_after_seconds(later)
    assert waited is not None and 100 < waited <= 120
    policy = RetryPolicy(backoff_seconds=1.0, max_delay_seconds=30)
    assert policy.delay(0, httpx.Response(429, headers={"Retry-After": "7"})) == 7.0
    assert policy.delay(0, httpx.Response(503, headers={"Retry-After": "3600"})) == 30
    assert 2.0 <= policy.delay(2, httpx.Response(503)) <= 4.0  # backoff with jitter when the server says nothing


def test_errors_keep_the_servers_message() -> None:
    err = error_for(404, {"detail": "document not found"}, "")
    assert isinstance(err, NotFound) and str(err) == "document not found" and err.status_code == 404
    assert isinstance(error_for(502, None, "<html>bad gateway</html>"), ServerError)
    assert str(error_for(418, None, "")) == "HTTP 418" and type(error_for(418, None, "")) is ApiError


def test_the_sse_reader_splits_events_and_ignores_comments() -> None:
    reader = SseReader()
    lines = ["retry: 3000", "", "event: ready", 'data: {"mode": "listen"}', "", ": keep-alive", "",
             "event: document", 'data: {"id": "d1",', 'data: "status": "READY"}', ""]
    events = [e for e in (reader.feed(line) for line in lines) if e is not None]
    assert [(e.event, e.data) for e in events] == [("ready", {"mode": "listen"}),
                                                   ("document", {"id": "d1", "status": "READY"})]


def test_citations_name_file_headings_and_page() -> None:
    assert str(Citation("d", "a.pdf", ["Intro", "Scope"], {"page": 3})) == "a.pdf · Intro > Scope · page 3"
    assert str(Citation("d", "a.pdf", [], {"page_start": 2, "page_end": 4})) == "a.pdf · pages 2-4"
    assert str(Citation("d", "a.md", ["A"], {"line_start": 9})) == "a.md · A · line 9"
    assert str(Citation("d", "a.md", ["A"], {"line_start": 1, "line_end": 5})) == "a.md · A · lines 1-5"
    assert str(Citation("d", "c.csv", [], {"line_start": 2, "line_end": 9, "row_start": 1, "row_end": 8})) == "c.csv · rows 1-8"


def doc(name: str, sha: str, status: str = "READY") -> Document:
    return Document(id=f"id-{name}-{sha}", knowledge_base_id="kb", filename=name, status=status, sha256=sha)


def test_the_plan_skips_held_bytes_replaces_changed_files_and_adds_the_rest(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    for rel, text in (("a.md", "same"), ("b.md", "changed"), ("c.md", "new"), ("sub/d.txt", "same"), ("sub/c2.txt", "new"),
                      (".hidden/e.md", "x"), (".f.md", "x"), ("g.log", "x")):
        (tmp_path / rel).write_text(text)
    files = collect([str(tmp_path)], None, ["*.log"])
    assert sorted(f.path.relative_to(tmp_path).as_posix() for f in files) == ["a.md", "b.md", "c.md", "sub/c2.txt",
                                                                                   "sub/d.txt"]
    assert [f.path.name for f in collect([str(tmp_path)], ["sub/d*"], None)] == ["d.txt"]
    for f in files:
        f.sha256 = sha256_of(f.path)
    sha = {f.path.name: f.sha256 for f in files}
    existing = [doc("a.md", sha["a.md"]), doc("b.md", "old-bytes"), doc("gone.md", "zzz", "DELETED")]
    steps = {s.file.path.name: s for s in plan(files, existing)}
    assert steps["a.md"].action == UNCHANGED and steps["a.md"].document == existing[0]
    assert steps["b.md"].action == UPDATE and steps["b.md"].document == existing[1]
    assert steps["c.md"].action == NEW
    assert steps["d.txt"].action == UNCHANGED and steps["d.txt"].document == existing[0]  # the KB holds its bytes
    assert steps["c2.txt"].action == UNCHANGED and steps["c2.txt"].note == f"same bytes as {tmp_path.name}/c.md"


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        collect([str(tmp_path / "nope")], None, None)


def test_the_ingest_summary_counts_statuses_and_names_each_failure(tmp_path: Path) -> None:
    from ultimate_rag.cli_http.plan import LocalFile, Step
    from ultimate_rag.cli_http.summary import REFUSED_BEFORE, Outcome, tally

    def out(name: str, action: str, status: str | None, error: str | None = None, reason: str | None = None,
            refused: bool = False):
        d = None if status is None else Document(id=name, knowledge_base_id="kb", filename=name, status=status,
                                                 error_message=reason)
        return Outcome(Step(LocalFile(tmp_path / name, name, 1, relative=f"sub/{name}"), action), d, error, refused)

    rows, failures = tally([out("a", NEW, "READY"), out("b", NEW, None, error="bad (HTTP 415)", refused=True),
                            out("c", NEW, "FAILED", reason="no text"), out("d", UNCHANGED, "READY"),
                            out("e", UNCHANGED, None), out("f", UPDATE, "PENDING"), out("g", UPDATE, "OUTDATED"),
                            out("h", NEW, None, error="cannot reach the server"),
                            out("i", REFUSED_BEFORE, None, error="bad (refused before, HTTP 415)", refused=True)])
    assert rows == [(NEW, 4, 1, 2, 1, 0, ""), (UPDATE, 2, 0, 0, 0, 1, "OUTDATED 1"),
                    (UNCHANGED, 2, 1, 0, 0, 0, "same bytes as another file 1"), (REFUSED_BEFORE, 1, 0, 0, 1, 0, "")]
    assert failures == [("sub/b", "bad (HTTP 415)"), ("sub/c", "no text"), ("sub/h", "cannot reach the server"),
                        ("sub/i", "bad (refused before, HTTP 415)")]

"""The layering the architecture notes promise, checked on the source: services run no SQL, no
module holds an SQL statement (they live in ``.sql`` files beside the modules that run them, loaded
by name), and every named query loads."""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest

import ultimate_rag
from ultimate_rag.adapters.postgres.sql import load_queries
from ultimate_rag.domain.status import DocumentStatus, JobStatus

SRC = Path(ultimate_rag.__file__).parent
# every named-query file: (package, file name); migrations are files run whole, not named queries
SQL_FILES = sorted((".".join(p.parent.relative_to(SRC.parent).parts), p.name) for p in SRC.rglob("*.sql")
                   if "migrations" not in p.relative_to(SRC).parts)


def _calls(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(SRC)}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names]


NOT_YET: set[str] = set()  # services modules whose SQL has not moved yet

# modules (paths under src/ultimate_rag) allowed to hold an inline statement: none. The pool's ping
# and the migration runner's bookkeeping are named queries too (database.sql, migrations.sql); the
# migrations themselves are files, run whole; the vector stores, the embedding cache and the hybrid
# contract's fixture rows have theirs beside them (adapters/vectors/*.sql, adapters/embedders/cache.sql,
# testing/hybrid_contract.sql). An entry here needs a comment saying why its SQL cannot move.
INLINE_SQL_ALLOWED: set[str] = set()
_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|NOTIFY|CREATE|ALTER|DROP|TRUNCATE|SET)\s")


def test_services_run_no_sql() -> None:
    found = [hit for path in sorted((SRC / "services").rglob("*.py"))
             if str(path.relative_to(SRC)) not in NOT_YET
             for hit in _calls(path, {"execute", "executemany", "fetchone", "fetchall"})]
    assert found == []


def test_the_named_query_files_include_those_beside_the_vector_stores_and_the_cache() -> None:
    assert {("ultimate_rag.adapters.postgres", "documents.sql"), ("ultimate_rag.adapters.vectors", "pgvector.sql"),
            ("ultimate_rag.adapters.vectors", "sparse_pg.sql"), ("ultimate_rag.adapters.vectors", "generations.sql"),
            ("ultimate_rag.adapters.embedders", "cache.sql")} <= set(SQL_FILES)


@pytest.mark.parametrize(("package", "filename"), SQL_FILES)
def test_every_named_query_file_loads(package: str, filename: str) -> None:
    queries = load_queries(filename, package)
    assert queries and all(body.strip() for body in queries.values())
    assert (resources.files(package) / filename).is_file()


def test_every_named_query_file_ships_in_the_package() -> None:
    """pyproject's package-data names a pattern matching each file (else a wheel lacks it)."""
    pyproject = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["ultimate_rag"]
    for package, filename in SQL_FILES:
        path = "/".join([*package.split(".")[1:], filename])
        assert any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns), path


def inline_statements(path: Path) -> list[str]:
    """String literals (f-string parts included, docstrings not) that begin an SQL statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and _STATEMENT.match(node.value)]


def test_no_module_holds_an_inline_statement() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert SRC / "adapters" / "vectors" / "pgvector.py" in modules and SRC / "cli.py" in modules
    found = [hit for path in modules
             if str(path.relative_to(SRC)) not in INLINE_SQL_ALLOWED for hit in inline_statements(path)]
    assert found == []


def test_every_allowed_inline_statement_is_still_there() -> None:
    assert all(inline_statements(SRC / module) for module in INLINE_SQL_ALLOWED)


def test_the_inline_sql_check_sees_a_statement(tmp_path: Path) -> None:
    module = tmp_path / "example.py"
    module.write_text('"""SELECT in a docstring is prose."""\n'
                      'def f(t):\n    return f"SELECT * FROM {t}", ("UPDATE x SET y = 1"\n " WHERE z")\n'
                      'def g(conn):\n    return conn.execute("SET LOCAL enable_indexscan = off")\n')
    assert sorted(inline_statements(module)) == ["example.py:3", "example.py:3", "example.py:6"]


# -- status literals in the SQL that writes document or job status ----------------------------------
# A statement that changes a document or a job takes the statuses it may move them from as
# parameters, from the transition tables (status.sources_of / job_sources_of; test_status_writers.py
# checks what each writer passes). A literal status compared in such a statement is allowed only
# where it states a fact rather than a transition's source; each one is listed here with why.
_WRITES_STATUS = re.compile(r"\bUPDATE\s+(documents|ingestion_jobs)\b", re.IGNORECASE)
_STATUSES = "|".join(sorted({*DocumentStatus, *JobStatus}))
_LITERAL_COMPARISON = re.compile(
    r"(?:\b(?:WHERE|AND|OR|WHEN|NOT)\s+|\(\s*)[\w.]*status\s*(?:=|<>|!=|IN|NOT\s+IN)\s*\(?\s*'(?:"
    + _STATUSES + r")'", re.IGNORECASE)
LITERAL_STATUS_FACTS = {
    # the rows it converges or claims are selected as the partial indexes spell them (RUNNING with an
    # expired lease, UPLOADING with an expired upload lease, PENDING and due, the newest SUCCEEDED):
    # a generic plan uses an index only on its own predicate. A READY or DELETED document's job is
    # done; the converged job's new status picks its document's. Every write in it is gated by the
    # tables' sources as parameters (JobQueue.claim_params).
    "claim",
    # the lease fence: a job is the worker's only while RUNNING under its id and attempt (a lease, not
    # a transition's source); the document write is gated by %(from_statuses)s (the table's sources)
    "fenced_document_update", "heartbeat",
    # the fence as above, and a READY document: the fact that lets its job end
    "complete_ready_jobs",
    # inside a SET: an OUTDATED document queued again keeps its twin as an exemption (SPEC §8)
    "queue_document", "queue_batch",
    # writes no status: documents outdated in favour of a twin being outdated now name its newer twin
    "repoint_duplicates",
}


def literal_status_writes() -> set[str]:
    """Named queries that update documents or jobs and compare a status with a literal."""
    found = set()
    for package, filename in SQL_FILES:
        for name, body in load_queries(filename, package).items():
            code = "\n".join(line.split("--")[0] for line in body.splitlines())
            if _WRITES_STATUS.search(code) and _LITERAL_COMPARISON.search(code):
                found.add(name)
    return found


def test_status_writes_compare_literal_statuses_only_where_they_state_a_fact() -> None:
    assert literal_status_writes() <= LITERAL_STATUS_FACTS


def test_the_literal_status_check_sees_a_hard_coded_source() -> None:
    assert _LITERAL_COMPARISON.search("UPDATE documents SET status = 'FAILED' WHERE id = 1 AND status IN ('PENDING')")
    assert _LITERAL_COMPARISON.search("WHERE d.status <> 'UPLOADING'")
    assert not _LITERAL_COMPARISON.search("UPDATE documents SET status = 'FAILED' WHERE status = ANY(%(sources)s)")

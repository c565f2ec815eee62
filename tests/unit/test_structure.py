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


# -- the layers, by what each module imports --------------------------------------------------------
# services and the API see ports (domain/ports/) and domain errors; only the adapters know the
# driver and the adapters themselves, and only bootstrap/ and adapter_factories.py wire them.
NO_ADAPTERS = ("services", "api")
DRIVERS = ("psycopg", "psycopg_pool")


def imported_modules(source: str, package: str) -> list[str]:
    """Every module ``source`` imports, its relative imports resolved against ``package``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[:len(parts) - node.level + 1] if node.level else []
            found.append(".".join([*base, *([node.module] if node.module else [])]))
    return found


def layer_violations(path: Path) -> list[str]:
    package = ".".join(path.relative_to(SRC.parent).parts[:-1])
    return [f"{path.relative_to(SRC)}: {name}" for name in imported_modules(path.read_text(encoding="utf-8"), package)
            if name.startswith("ultimate_rag.adapters") or name.split(".")[0] in DRIVERS]


def test_services_and_the_api_import_no_adapter_and_no_driver() -> None:
    paths = sorted(p for layer in NO_ADAPTERS for p in (SRC / layer).rglob("*.py"))
    assert len(paths) > 40 and [hit for path in paths for hit in layer_violations(path)] == []


def test_the_layer_check_resolves_relative_imports() -> None:
    source = "import psycopg\nfrom ..adapters.postgres.database import Database\nfrom . import failures\n"
    assert imported_modules(source, "ultimate_rag.services") == [
        "psycopg", "ultimate_rag.adapters.postgres.database", "ultimate_rag.services"]


def test_routes_never_see_the_container() -> None:
    """Each route takes the narrow dependencies it uses (api/deps.py), never the whole container."""
    found = [f"{p.name}: {name}" for p in sorted((SRC / "api" / "routes").glob("*.py"))
             for name in ("Container", "app.state.container") if name in p.read_text(encoding="utf-8")]
    assert found == []


# -- typed collaborators -----------------------------------------------------------------------------
def untyped_collaborators(source: str) -> list[str]:
    """``Class(parameter)`` for each constructor parameter annotated with ``Any`` anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                found += [f"{node.name}({a.arg})" for a in [*item.args.args, *item.args.kwonlyargs]
                          if a.annotation is not None
                          and any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(a.annotation))]
    return found


def test_no_service_takes_a_collaborator_typed_any() -> None:
    """Every collaborator a service is handed is a port (domain/ports/) or another service."""
    found = [f"{path.relative_to(SRC)}: {hit}" for path in sorted((SRC / "services").rglob("*.py"))
             for hit in untyped_collaborators(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_any_check_sees_one() -> None:
    source = ("class S:\n    def __init__(self, a: int, *, models: Any = None,"
              " rows: dict[str, Any] | None = None) -> None: ...\n")
    assert untyped_collaborators(source) == ["S(models)", "S(rows)"]


# -- size ---------------------------------------------------------------------------------------------
MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in sorted(SRC.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


# -- the workbench's modules: no import circle ------------------------------------------------------
# A module never imports one above it; a view that needs one above asks through the event bus of
# state.js (docs/workbench.md has the order).
WEB = SRC / "api" / "web"
JS_IMPORT = re.compile(r'^\s*import\s+(?:[\w*{}\s,$]+\s+from\s+)?"\./([\w.-]+\.js)";', re.MULTILINE)


def import_circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every circle of the import graph, each once, as the path that closes it."""
    circles: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in graph.get(node, []):
            if nxt in path:
                circle = [*path[path.index(nxt):], nxt]
                if frozenset(circle) not in seen:
                    seen.add(frozenset(circle))
                    circles.append(circle)
            else:
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return circles


def test_the_workbench_modules_import_no_circle() -> None:
    graph = {p.name: JS_IMPORT.findall(p.read_text(encoding="utf-8")) for p in sorted(WEB.glob("*.js"))}
    assert len(graph) >= 10 and sum(map(len, graph.values())) > 30
    assert import_circles(graph) == []


def test_the_circle_check_sees_one() -> None:
    graph = {"a.js": ["b.js"], "b.js": ["c.js", "d.js"], "c.js": ["a.js"], "d.js": []}
    assert import_circles(graph) == [["a.js", "b.js", "c.js", "a.js"]]


# -- type: ignore ----------------------------------------------------------------------------------------
MAX_TYPE_IGNORES = 40
_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)$")
_EXPLAINED = re.compile(r"^\[[a-z-]+(, [a-z-]+)*\]  # \S")


def type_ignores(root: Path) -> dict[str, str]:
    """``path:line`` -> what follows the type-ignore comment on that line."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (match := _IGNORE.search(line)) is not None:
                found[f"{path.relative_to(root.parent)}:{number}"] = match["rest"]
    return found


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    """At most 40 in src and tests, each with its error code and, on its line, why mypy is wrong there."""
    found = type_ignores(SRC) | type_ignores(SRC.parents[1] / "tests")
    assert len(found) <= MAX_TYPE_IGNORES, sorted(found)
    assert [where for where, rest in found.items() if not _EXPLAINED.match(rest)] == []


def test_the_type_ignore_check_sees_an_unexplained_one() -> None:
    ignore = "# type" + ": ignore"  # spelled apart: this file is scanned too
    explained, bare = _IGNORE.search(f"x = f()  {ignore}[arg-type]  # a fake"), _IGNORE.search(f"x = f()  {ignore}")
    assert explained is not None and _EXPLAINED.match(explained["rest"])
    assert bare is not None and not _EXPLAINED.match(bare["rest"])

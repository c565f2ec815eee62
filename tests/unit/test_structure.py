"""The layering the architecture notes promise, checked on the source: services run no SQL (it
lives in ``.sql`` files under adapters/postgres, loaded by name), and every named query loads."""

from __future__ import annotations

import ast
import re
from importlib import resources
from pathlib import Path

import pytest

import ultimate_rag
from ultimate_rag.adapters.postgres.sql import load_queries

SRC = Path(ultimate_rag.__file__).parent
SQL_FILES = sorted(p.name for p in (SRC / "adapters" / "postgres").glob("*.sql"))


def _calls(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(SRC)}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names]


NOT_YET: set[str] = set()  # services modules whose SQL has not moved yet

# adapters/postgres modules whose SQL has not all moved to .sql files yet
INLINE_SQL_NOT_YET = {"lifecycle.py", "queue.py", "documents.py", "dedup.py", "search_filters.py",
                      "migrations.py", "embedded.py", "database.py"}
_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|NOTIFY|CREATE|ALTER|DROP|TRUNCATE)\s")


def test_services_run_no_sql() -> None:
    found = [hit for path in sorted((SRC / "services").rglob("*.py"))
             if str(path.relative_to(SRC)) not in NOT_YET
             for hit in _calls(path, {"execute", "executemany", "fetchone", "fetchall"})]
    assert found == []


@pytest.mark.parametrize("filename", SQL_FILES)
def test_every_named_query_file_loads(filename: str) -> None:
    queries = load_queries(filename)
    assert queries and all(body.strip() for body in queries.values())
    assert (resources.files("ultimate_rag.adapters.postgres") / filename).is_file()


def inline_statements(path: Path) -> list[str]:
    """String literals (f-string parts included, docstrings not) that begin an SQL statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and _STATEMENT.match(node.value)]


def test_postgres_adapters_keep_their_sql_in_sql_files() -> None:
    found = [hit for path in sorted((SRC / "adapters" / "postgres").glob("*.py"))
             if path.name not in INLINE_SQL_NOT_YET for hit in inline_statements(path)]
    assert found == []


def test_the_inline_sql_check_sees_a_statement(tmp_path: Path) -> None:
    module = tmp_path / "example.py"
    module.write_text('"""SELECT in a docstring is prose."""\n'
                      'def f(t):\n    return f"SELECT * FROM {t}", ("UPDATE x SET y = 1"\n " WHERE z")\n')
    assert inline_statements(module) == ["example.py:3", "example.py:3"]

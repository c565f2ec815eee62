"""The CLI hands its settings to bootstrap and the API explicitly: reading ``--data-dir`` never
writes the process environment; only a child worker process gets what it needs through its own
environment (the database this command uses, the data directory)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ultimate_rag.cli import _settings, _worker_env
from ultimate_rag.settings import Settings


def test_data_dir_is_passed_in_settings_not_through_the_environment(tmp_path: Path) -> None:
    before = dict(os.environ)
    settings = _settings(argparse.Namespace(data_dir=str(tmp_path / "d")))
    assert settings.data_dir == (tmp_path / "d").resolve()
    assert dict(os.environ) == before


def test_a_child_worker_gets_the_database_and_data_dir_of_this_command(tmp_path: Path) -> None:
    before = dict(os.environ)
    env = _worker_env(Settings(data_dir=tmp_path, worker_metrics_port=9100), 2, "postgresql://db/x")
    assert env["ULTIMATE_RAG_DATABASE_URL"] == "postgresql://db/x"
    assert env["ULTIMATE_RAG_DATA_DIR"] == str(tmp_path)
    assert env["ULTIMATE_RAG_WORKER_METRICS_PORT"] == "9102"
    assert dict(os.environ) == before

"""The production backends' client libraries (boto3, pymilvus, qdrant-client) come with the
``backends`` extra and are imported only when such a backend is configured, the first time it is
used: a process on PostgreSQL alone never loads them, and a missing one says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRA = "ultimate-rag[backends]"


def import_backend(module: str, needed_by: str, *, package: str | None = None) -> ModuleType:
    """``module``, or a RuntimeError naming ``needed_by`` and the package to install (``package``:
    its name on the package index when that is not the module's)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        name = package or module
        raise RuntimeError(f"{needed_by} needs {name}: pip install '{EXTRA}' (or {name})") from exc

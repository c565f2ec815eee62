"""Loads named queries from ``.sql`` files (``-- name --`` headers)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z_]+) --$", re.MULTILINE)
_HERE = __name__.rpartition(".")[0]  # ultimate_rag.adapters.postgres


@cache
def load_queries(filename: str, package: str | None = None) -> dict[str, str]:
    """The named queries of ``filename`` in ``package`` (adapters/postgres unless told otherwise:
    the vector stores and the embedding cache keep theirs beside them)."""
    text = (resources.files(package or _HERE) / filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}

"""Loads named queries from ``.sql`` files (``-- name --`` headers)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z_]+) --$", re.MULTILINE)


@cache
def load_queries(filename: str) -> dict[str, str]:
    text = (resources.files(__package__) / filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}

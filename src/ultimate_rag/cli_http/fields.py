"""Document metadata on the command line: ``--metadata key=value`` (ingest) and ``--filter`` (search,
ask). A value is read as JSON when it is a number, a boolean or a list (``year=2025``,
``draft=false``, ``tags=["hr","policy"]``), else as the string written (``office=Berlin``,
``code=007``); a dotted key names a nested field (``review.by=Lee``). ``--filter`` also takes a
whole filter as a JSON object (``'{"year": {"$gte": 2024}}'``, docs/metadata.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, bool | int | float | list) else text


def _pair(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), _value(value)


def metadata_pair(text: str) -> tuple[str, Any]:
    """An ``argparse`` type: one ``key=value`` of ``--metadata``."""
    return _pair(text)


def metadata_of(pairs: list[tuple[str, Any]] | None) -> dict[str, Any] | None:
    """The pairs as a metadata object (dotted keys nested), or None when there are none."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for key, value in pairs:
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else node
        node[last] = value
    return out


def json_object(text: str) -> dict[str, Any]:
    """An ``argparse`` type: a JSON object."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("give a JSON object")
    return value


def filter_condition(text: str) -> dict[str, Any]:
    """An ``argparse`` type: one ``--filter``, ``key=value`` (equality) or a JSON object."""
    if text.lstrip().startswith("{"):
        return json_object(text)
    key, value = _pair(text)
    return {key: value}


def with_metadata_filter(filters: dict[str, Any] | None,
                         conditions: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """``--filters`` with the ``--filter`` conditions ANDed into its ``metadata``."""
    if not conditions:
        return filters
    parts = [*([filters["metadata"]] if filters and filters.get("metadata") else []), *conditions]
    return {**(filters or {}), "metadata": parts[0] if len(parts) == 1 else {"$and": parts}}

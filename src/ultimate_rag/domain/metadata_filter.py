"""``filters.metadata`` (SPEC §10): a typed tree checked once, here, and translated by the adapters
(adapters/postgres/search_filters.py). ``matches`` is the same rule in Python: the reference the
contract suite compares every vector store's answer with.

    {"office": "Berlin", "year": {"$gte": 2024}, "$or": [{"tags": {"$contains": "hr"}},
                                                         {"doc.author": {"$exists": true}}]}

A field is a dotted path into the metadata (``doc.author``). Fields side by side, and operators
side by side on one field, are combined with AND. Operators:

* ``$eq`` ``$ne`` — a string, number or boolean, compared with its type (``3`` is not ``"3"``);
  ``$ne`` also matches documents without the field. A bare value is ``$eq``.
* ``$in`` ``$nin`` — a non-empty list of such values; ``$nin`` also matches documents without it.
* ``$gt`` ``$gte`` ``$lt`` ``$lte`` — a number (matches numbers) or an ISO 8601 date or date-time
  (matches strings that are dates: a date is its midnight, no offset is UTC).
* ``$contains`` — a string that a list of strings holds.
* ``$exists`` — true or false.
* ``$and`` ``$or`` — non-empty lists of filters.

An unknown operator, a value of the wrong type, or a filter over the limits is
``MetadataError`` (422) naming where."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from .metadata import KEY, MetadataError, instant, is_number

MAX_CONDITIONS = 64
MAX_NESTING = 6
MAX_IN = 100

Scalar = str | int | float | bool


class Op(StrEnum):
    EQ = "$eq"
    NE = "$ne"
    IN = "$in"
    NIN = "$nin"
    GT = "$gt"
    GTE = "$gte"
    LT = "$lt"
    LTE = "$lte"
    CONTAINS = "$contains"
    EXISTS = "$exists"


RANGE = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE})


@dataclass(frozen=True, slots=True)
class Condition:
    """One operator on one field. ``value``: a scalar (``$eq``, ``$ne``, ``$contains``), a tuple of
    scalars (``$in``, ``$nin``), a number or an aware datetime (ranges), a bool (``$exists``)."""

    path: tuple[str, ...]
    op: Op
    value: Scalar | tuple[Scalar, ...] | datetime


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[MetadataFilter, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[MetadataFilter, ...]


MetadataFilter = Condition | AllOf | AnyOf


def parse(value: object, where: str = "filters.metadata") -> MetadataFilter:
    """The checked tree of a ``filters.metadata`` object."""
    counter = [0]
    return _group(value, where, 1, counter)


def _group(value: object, where: str, nesting: int, counter: list[int]) -> MetadataFilter:
    if not isinstance(value, Mapping) or not value:
        raise MetadataError(f"{where} must be a non-empty JSON object")
    if nesting > MAX_NESTING:
        raise MetadataError(f"{where}: $and/$or nested more than {MAX_NESTING} deep")
    parts: list[MetadataFilter] = []
    for key, item in value.items():
        here = f"{where}.{key}"
        if key in ("$and", "$or"):
            if not isinstance(item, list) or not item:
                raise MetadataError(f"{here} must be a non-empty list of filters")
            inner = tuple(_group(x, f"{here}[{i}]", nesting + 1, counter) for i, x in enumerate(item))
            parts.append(AllOf(inner) if key == "$and" else AnyOf(inner))
        elif isinstance(key, str) and key.startswith("$"):
            raise MetadataError(f"{here}: unknown operator at the top of a filter (a field name, $and or $or)")
        else:
            parts.extend(_field(_path(key, where), item, here, counter))
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _path(key: object, where: str) -> tuple[str, ...]:
    segments = tuple(str(key).split("."))
    if not isinstance(key, str) or not all(KEY.match(s) for s in segments) or len(segments) > 3:
        raise MetadataError(f"{where}: invalid field {str(key)[:80]!r} (keys joined by dots, at most 3)")
    return segments


def _field(path: tuple[str, ...], item: object, where: str, counter: list[int]) -> list[Condition]:
    bare = not (isinstance(item, Mapping) and item and all(str(k).startswith("$") for k in item))
    ops: dict[Any, Any] = dict(item) if isinstance(item, Mapping) and not bare else {"$eq": item}
    out = []
    for name, operand in ops.items():
        counter[0] += 1
        if counter[0] > MAX_CONDITIONS:
            raise MetadataError(f"filters.metadata: at most {MAX_CONDITIONS} conditions")
        try:
            op = Op(name)
        except ValueError:
            known = " ".join(o.value for o in Op)
            raise MetadataError(f"{where}: unknown operator {str(name)[:40]!r} (known: {known})") from None
        out.append(Condition(path, op, _operand(op, operand, where if bare else f"{where}.{name}")))
    return out


def _scalar(value: object, where: str) -> Scalar:
    if isinstance(value, bool | int | float) and (isinstance(value, bool) or is_number(value)):
        return value
    if isinstance(value, str) and len(value) <= 2048:
        return value
    if isinstance(value, Mapping):
        raise MetadataError(f"{where}: expected a string, number or boolean, got an object (name nested "
                            "fields with a dotted path: doc.author)")
    raise MetadataError(f"{where}: expected a string, number or boolean, got {_kind(value)}")


def _operand(op: Op, value: object, where: str) -> Scalar | tuple[Scalar, ...] | datetime:
    if op in (Op.EQ, Op.NE):
        return _scalar(value, where)
    if op in (Op.IN, Op.NIN):
        if not isinstance(value, list) or not value or len(value) > MAX_IN:
            raise MetadataError(f"{where}: expected a list of 1 to {MAX_IN} values, got {_kind(value)}")
        return tuple(_scalar(v, f"{where}[{i}]") for i, v in enumerate(value))
    if op in RANGE:
        if isinstance(value, int | float) and is_number(value):
            return value
        moment = instant(value)
        if moment is None:
            raise MetadataError(f"{where}: expected a number or an ISO 8601 date, got {_kind(value)}")
        return moment
    if op is Op.CONTAINS:
        if not isinstance(value, str):
            raise MetadataError(f"{where}: expected a string (an item of a list of strings), got {_kind(value)}")
        return value
    if not isinstance(value, bool):
        raise MetadataError(f"{where}: expected true or false, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return {bool: "a boolean", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


# --- the rule in Python (the reference implementation) ------------------------------------------

_MISSING = object()


def _lookup(metadata: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = metadata
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _same(a: object, b: object) -> bool:
    """JSON equality with types: numbers by value, never a boolean equal to a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def matches(tree: MetadataFilter, metadata: Mapping[str, Any]) -> bool:
    if isinstance(tree, AllOf):
        return all(matches(p, metadata) for p in tree.parts)
    if isinstance(tree, AnyOf):
        return any(matches(p, metadata) for p in tree.parts)
    found = _lookup(metadata, tree.path)
    op, value = tree.op, tree.value
    if op is Op.EXISTS:
        return (found is not _MISSING) is value
    if op in (Op.EQ, Op.NE):
        return _same(found, value) is (op is Op.EQ)
    if op in (Op.IN, Op.NIN):
        assert isinstance(value, tuple)
        return any(_same(found, v) for v in value) is (op is Op.IN)
    if op is Op.CONTAINS:
        return isinstance(found, list) and value in found
    if isinstance(value, datetime):
        moment = instant(found)
        return moment is not None and _compare(op, moment, value)
    return is_number(found) and _compare(op, found, value)


def _compare(op: Op, left: Any, right: Any) -> bool:
    return bool({Op.GT: left > right, Op.GTE: left >= right, Op.LT: left < right, Op.LTE: left <= right}[op])

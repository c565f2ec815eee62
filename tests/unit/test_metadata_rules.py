"""Document metadata and its filters, the pure rules (domain/metadata.py, domain/metadata_filter.py):
validation naming the field, JSON Merge Patch, the ISO 8601 rule, cleaning what files and remotes
say, the filter tree's checks and the reference rule every store is compared with."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from ultimate_rag.domain.metadata import (
    MetadataError,
    clean,
    fitted,
    instant,
    merge_patch,
    parsed_fields,
    source_fields,
    validate,
)
from ultimate_rag.domain.metadata_filter import AllOf, AnyOf, Condition, Op, matches, parse


def test_valid_metadata_is_kept_as_written() -> None:
    meta = {"office": "Berlin", "year": 2025, "ratio": 0.5, "ok": True, "tags": ["hr"], "部门": "法务",
            "review": {"by": "Lee", "at": {"day": "2025-01-02"}}, "_x-y": ""}
    assert validate(meta) == meta


@pytest.mark.parametrize(("value", "where"), [
    ({"a": None}, "metadata.a"), ({"a": [1]}, "metadata.a[0]"), ({"a": float("nan")}, "metadata.a"),
    ({"a": {"b": {"c": {"d": 1}}}}, "metadata.a.b.c"), ({"1a": 1}, "metadata"), ({"a b": 1}, "metadata"),
    ({"a": "x\x00"}, "metadata.a"), ({"a": ["x"] * 101}, "metadata.a"), ({"s3": {}}, "metadata.s3"),
    ({"big": ["x" * 2000] * 9}, "metadata is"), ("x", "metadata must"),
])
def test_invalid_metadata_names_the_field(value: object, where: str) -> None:
    with pytest.raises(MetadataError) as err:
        validate(value)
    assert err.value.message.startswith(where), err.value.message


def test_reserved_keys_are_the_products() -> None:
    assert validate({"source": {"path": "a"}}, reserved=True) == {"source": {"path": "a"}}
    current = {"doc": {"title": "T"}, "a": 1, "o": {"x": 1, "y": 2}}
    assert merge_patch(current, {"a": None, "b": [], "o": {"x": None, "z": 3}}) == \
        {"doc": {"title": "T"}, "b": [], "o": {"y": 2, "z": 3}}
    with pytest.raises(MetadataError, match=r"metadata\.doc: reserved"):
        merge_patch(current, {"doc": None})


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-03-01", datetime(2025, 3, 1, tzinfo=UTC)),
    ("2025-03-01T10:00", datetime(2025, 3, 1, 10, tzinfo=UTC)),
    ("2025-03-01 10:00:30.5Z", datetime(2025, 3, 1, 10, 0, 30, 500000, tzinfo=UTC)),
    ("2025-03-01T10:00:00+02", datetime(2025, 3, 1, 8, tzinfo=UTC)),
    ("2025-03-01T10:00:00-0530", datetime(2025, 3, 1, 10, tzinfo=timezone(-timedelta(hours=5, minutes=30)))),
    ("2025-02-30", None), ("March 1", None), ("20250301", None), (20250301, None), ("2025-03-01T25:00", None),
])
def test_the_iso_8601_rule(text: object, expected: datetime | None) -> None:
    assert instant(text) == expected


def test_found_fields_are_cleaned_never_refused() -> None:
    found = {"Title": "  T ", "last modified": date(2024, 1, 2), "when": datetime(2024, 1, 2, 3, 4),
             "tags": ["a", 1, None, {"x": 1}], "bad\x00": "x\x00y", "": "gone", "deep": {"a": {"b": {"c": 1}}},
             "n": float("inf"), "none": None, "9lives": 1}
    cleaned = clean(found)
    assert cleaned["last_modified"] == "2024-01-02" and cleaned["tags"] == ["a", "1"] and cleaned["bad"] == "xy"
    assert cleaned["Title"] == "T" and cleaned["when"] == "2024-01-02T03:04:00+00:00"
    assert "none" not in cleaned and "n" not in cleaned and "" not in cleaned and cleaned["_9lives"] == 1
    assert "deep" not in cleaned  # beyond the depth: left out, and an object left empty goes too
    assert clean({"o": {"a": {"b": 1, "c": {"d": 1}}}}) == {"o": {"a": {"b": 1}}}
    validate(cleaned, reserved=True)  # always valid
    assert len(fitted({f"k{i}": "x" * 1000 for i in range(40)})) == 16  # 16 KiB of JSON


def test_parsed_and_source_fields() -> None:
    assert parsed_fields({"title": "Heading", "properties": {"author": "A", "created": "2024-01-01", "x": 1},
                          "front_matter_fields": {"tags": ["hr"]}}) == \
        {"doc": {"author": "A", "created": "2024-01-01", "title": "Heading"}, "front_matter": {"tags": ["hr"]}}
    assert parsed_fields({"encoding": "utf-8"}) == {}
    assert source_fields("/a/b/c.pdf") == {"path": "a/b/c.pdf", "folder": "a/b", "folders": ["a", "a/b"]}
    assert source_fields("c.pdf") == {"path": "c.pdf"}


def test_a_filter_parses_into_a_typed_tree() -> None:
    tree = parse({"office": "Berlin", "year": {"$gte": 2024, "$lt": 2026},
                  "$or": [{"doc.author": {"$exists": True}}, {"signed": {"$lte": "2024-06-30"}}]})
    assert tree == AllOf((Condition(("office",), Op.EQ, "Berlin"), Condition(("year",), Op.GTE, 2024),
                          Condition(("year",), Op.LT, 2026),
                          AnyOf((Condition(("doc", "author"), Op.EXISTS, True),
                                 Condition(("signed",), Op.LTE, datetime(2024, 6, 30, tzinfo=UTC))))))


@pytest.mark.parametrize(("raw", "words"), [
    ({"a": {"$regex": "x"}}, "filters.metadata.a: unknown operator '$regex'"),
    ({"a": {"$gt": "soon"}}, "filters.metadata.a.$gt: expected a number or an ISO 8601 date"),
    ({"a": {"$gt": True}}, "filters.metadata.a.$gt"), ({"a": {"$in": []}}, "filters.metadata.a.$in"),
    ({"a": {"$in": [[1]]}}, "filters.metadata.a.$in[0]"), ({"a": {"$contains": ["x"]}}, "$contains"),
    ({"a": {"$exists": 1}}, "true or false"), ({"a": None}, "got null"), ({"a": {"b": 1}}, "dotted path"),
    ({"$and": []}, "$and must be"), ({"$not": {"a": 1}}, "unknown operator"), ({}, "non-empty"),
    ({"a.b.c.d": 1}, "invalid field"), ({"a": {"$eq": 1, "b": 2}}, "got an object"),
    ({"$or": [{"$or": [{"$or": [{"$or": [{"$or": [{"$or": [{"a": 1}]}]}]}]}]}]}, "nested more than"),
    ({f"k{i}": 1 for i in range(65)}, "at most 64 conditions"),
])
def test_bad_filters_say_where(raw: dict, words: str) -> None:
    with pytest.raises(MetadataError) as err:
        parse(raw)
    assert words in err.value.message, err.value.message


@pytest.mark.parametrize(("raw", "meta", "expected"), [
    ({"a": 1}, {"a": 1.0}, True), ({"a": 1}, {"a": True}, False), ({"a": True}, {"a": 1}, False),
    ({"a": "1"}, {"a": 1}, False), ({"a": {"$ne": 1}}, {}, True), ({"a": {"$nin": [1, 2]}}, {"a": 3}, True),
    ({"a": {"$in": ["x", 2]}}, {"a": 2}, True), ({"a": {"$gt": 1}}, {"a": "2"}, False),
    ({"a": {"$gt": "2024-01-01"}}, {"a": "2024-01-01T00:00:01+00:00"}, True),
    ({"a": {"$gte": "2024-01-01"}}, {"a": "2024-01-01T00:00:00Z"}, True),
    ({"a": {"$lt": "2024-01-01"}}, {"a": "not a date"}, False), ({"a": {"$contains": "x"}}, {"a": "x"}, False),
    ({"a": {"$contains": "x"}}, {"a": ["y", "x"]}, True), ({"a.b": 1}, {"a": {"b": 1}}, True),
    ({"a.b": {"$exists": False}}, {"a": 1}, True), ({"a": ["x"]}, {}, None),
])
def test_the_reference_rule(raw: dict, meta: dict, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(MetadataError):
            parse(raw)
        return
    assert matches(parse(raw), meta) is expected

"""What counts as an identifier, how spellings fold into one key, and which parts of a chunk's
identifiers a query finds it by (domain/identifiers.py; docs/search.md "Identifiers")."""

from __future__ import annotations

from uuid import uuid4

import pytest

from ultimate_rag.domain.identifiers import (
    chunk_identifiers,
    identifier_keys,
    identifier_tier,
    query_identifiers,
    spans_of,
)


def keys(query: str) -> list[str]:
    return [q.key for q in query_identifiers(query)]


def finds(query: str, chunk: str) -> bool:
    """Whether a query naming an identifier finds a chunk holding ``chunk``."""
    asked = keys(query)
    assert asked, query
    return set(asked) <= set(identifier_keys(chunk))


@pytest.mark.parametrize(("query", "expected"), [
    ("SR-88346 是什么问题？", ["sr88346"]),
    ("SR-88346는 무엇인가요?", ["sr88346"]),
    ("What does E1234 mean?", ["e1234"]),
    ("clause 7.3.2", ["7.3.2"]),
    ("upgrade to v2.14.1", ["v2.14.1"]),
    ("PO-2024-00017 status", ["po2024-00017"]),
    ("按照GB/T 7714的格式", ["gb/t7714"]),
    ("ISO 9001:2015 audit", ["iso9001:2015"]),
    ("ticket 88346", ["88346"]),
    ("see issue #1234", ["#1234"]),
    ("docs/SR-88346.md", ["docs/sr88346.md"]),
    ("ΑΒ-12 and БВ-7", ["αβ12", "бв7"]),
])
def test_a_query_names_its_identifiers_in_any_script_context(query: str, expected: list[str]) -> None:
    assert keys(query) == expected


@pytest.mark.parametrize("query", [
    "How do I reset my password?", "the 2024 report", "chapter 3", "came 1st in 100ms", "4K video at 60fps",
    "打印机卡纸怎么办？", "서울 지하철 2호선", "1,000,000 won",
])
def test_words_counts_years_and_quantities_are_not_identifiers(query: str) -> None:
    assert keys(query) == []


def test_the_query_reports_an_identifier_as_it_was_written() -> None:
    [asked] = query_identifiers("ＳＲ－８８３４６ 是什么？")
    assert (asked.text, asked.key) == ("ＳＲ－８８３４６", "sr88346")


@pytest.mark.parametrize("written", [
    "SR-88346", "sr-88346", "SR88346", "SR 88346", "SR_88346", "ＳＲ－８８３４６", "SR\u201188346", "SR\u201388346",
    "SR\u221288346", "SR\u00ad-88346",
])
def test_case_width_dashes_and_letter_digit_joints_fold_into_one_key(written: str) -> None:
    assert finds(written, "Ticket SR-88346 was opened on Monday.")
    assert finds("SR-88346", f"工单{written}已关闭")


@pytest.mark.parametrize(("query", "chunk"), [
    ("SR-88346", "Ticket SR-88364 was opened."),  # transposed digits
    ("SR-8834", "Ticket SR-88346 was opened."),  # a prefix inside a segment
    ("88346", "Order 188346 shipped."),
    ("88346", "Order 883461 shipped."),
    ("7.3.2", "See clause 7.3 for details."),  # the chunk names less than the query
    ("3.2", "See clause 7.3.2 for details."),  # no part starts after a dot between digits
    ("73.2", "See clause 7.3.2 for details."),  # separators between digits stay
    ("GB/T 7714-2015", "按照GB/T 7714执行"),
    ("E1234", "code E12345 appeared"),
])
def test_near_misses_never_match(query: str, chunk: str) -> None:
    assert not finds(query, chunk)


@pytest.mark.parametrize(("query", "chunk"), [
    ("GB/T 7714", "参考文献按照GB/T 7714—2015著录。"),  # an edition of the standard
    ("7.3", "See clause 7.3.2 for details."),  # a clause holds its sub-clauses
    ("v2", "Upgrade to v2.14.1 first."),
    ("2.14.1", "Upgrade to v2.14.1 first."),  # the number after a letter prefix
    ("88346", "Ticket SR-88346 was opened."),
    ("00017", "Order PO-2024-00017 shipped."),
    ("PO-2024", "Order PO-2024-00017 shipped."),
    ("SR-88346", "see docs/SR-88346.md"),  # whatever follows a slash
    ("#1234", "fixed in PR#1234"),
    ("ISO 9001", "certified to ISO 9001:2015"),
    ("1234-A", "part 1234A"),
    ("HP-3300-K", "part number HP-3300-K."),  # the full stop ends the sentence, not the identifier
])
def test_partial_identifiers_find_the_longer_ones_at_separators(query: str, chunk: str) -> None:
    assert finds(query, chunk)


def test_a_chunk_is_found_by_its_headings_identifiers_too() -> None:
    assert "sr88346" in chunk_identifiers("The customer cannot log in.", ("Tickets", "SR-88346"))


def test_spans_point_at_the_identifier_as_the_text_writes_it() -> None:
    text = "工单ＳＲ－８８３４６已关闭，见 docs/SR-88346.md"
    spans = spans_of(text, ["sr88346"])
    assert [text[s:e] for s, e in spans] == ["ＳＲ－８８３４６", "SR-88346"]
    assert spans_of("Straße B-214", ["b214"]) == [(7, 12)]  # ß folds to two letters before it


def test_long_runs_are_data_not_identifiers() -> None:
    assert identifier_keys("x" * 300 + "1") == []
    assert identifier_keys("a1." * 200) == []


def test_the_tier_puts_holders_first_and_keeps_the_fused_order_within() -> None:
    a, b, c, d = (uuid4() for _ in range(4))
    ranked = [(a, 0.9), (b, 0.8), (c, 0.7), (d, 0.6)]
    assert identifier_tier(ranked, {}) == ranked
    assert identifier_tier(ranked, {d: 1, b: 1}) == [(b, 0.8), (d, 0.6), (a, 0.9), (c, 0.7)]
    assert identifier_tier(ranked, {d: 2, b: 1})[0] == (d, 0.6)  # holding both of the query's first

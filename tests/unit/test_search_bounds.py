"""What a reader's search request may cost (docs/security.md, "Search requests"): the filename glob
is collapsed, capped and escaped before it becomes a regular expression; highlighting reads a
bounded number of terms and finds them all in one pass."""

from __future__ import annotations

import fnmatch
import random
import re

import pytest

from ultimate_rag.api.search_schemas import SearchFiltersIn
from ultimate_rag.domain.search import (
    HIGHLIGHT_MAX_TERMS,
    MAX_GLOB_SINGLES,
    MAX_GLOB_STARS,
    glob_to_regex,
    highlighter,
    highlights,
)


def test_runs_of_wildcards_collapse() -> None:
    assert glob_to_regex("*" * 255) == "^.*$"
    assert glob_to_regex("*?*?**") == "^" + ".." + ".*" + "$"  # its two ?, then one *
    assert glob_to_regex("a**b") == glob_to_regex("a*b") == "^a.*b$"


def test_more_than_the_allowed_stars_are_refused() -> None:
    assert glob_to_regex("*a" * MAX_GLOB_STARS)  # at the limit: fine
    with pytest.raises(ValueError, match="wildcards"):
        glob_to_regex("*a" * (MAX_GLOB_STARS + 1))
    with pytest.raises(ValueError):  # the API says 422 (a validation error)
        SearchFiltersIn(filename="*a" * (MAX_GLOB_STARS + 1))
    assert SearchFiltersIn(filename="*" * 255).filename == "*" * 255  # collapses to one


def test_more_than_the_allowed_one_character_wildcards_are_refused() -> None:
    assert glob_to_regex("?" * 16 + "[a]" * 16)  # at the limit: fine
    for pattern in ("?" * (MAX_GLOB_SINGLES + 1), "[a]" * (MAX_GLOB_SINGLES + 1), "?*" * (MAX_GLOB_SINGLES + 1)):
        with pytest.raises(ValueError, match="wildcards"):
            glob_to_regex(pattern)


def test_every_other_character_is_escaped_inside_sets_too() -> None:
    assert glob_to_regex("[[:alpha:]]") == r"^[\[\:alpha\:]\]$"
    assert glob_to_regex(r"[\]") == r"^[\\]$"
    assert glob_to_regex("a.b+c(d)|e{2}^$") == r"^a\.b\+c\(d\)\|e\{2\}\^\$$"
    assert glob_to_regex("[!a-z]") == "^[^a-z]$"


@pytest.mark.parametrize("pattern", ["*.pdf", "report-202?-*.docx", "[a-c]*", "[!a-c]*", "*[.]*", "a+b(?).txt"])
def test_the_translation_matches_as_a_glob_does(pattern: str) -> None:
    names = ["report.pdf", "report-2021-x.docx", "b.txt", "x.md", "a+b(1).txt", "noext"]
    for name in names:
        # Python's regex reads the escapes as PostgreSQL's ARE does for these characters
        assert bool(re.fullmatch(glob_to_regex(pattern)[1:-1], name)) == fnmatch.fnmatchcase(name, pattern)


def test_highlighting_reads_a_bounded_number_of_terms() -> None:
    rng = random.Random(7)
    query = "".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(4000))  # 3999 distinct bigrams
    marks = highlighter(query)
    assert marks.cjk is not None and marks.cjk.pattern.count("|") < HIGHLIGHT_MAX_TERMS
    content = query[:30] + "x" * 1000
    assert marks(content)[0][0] == 0  # what it reads is still found


def test_overlapping_occurrences_are_all_found_in_one_pass() -> None:
    content = "京京京 E-4821 e-4821x 3.2.1.4"
    spans = highlights(content, "京京 E-4821 3.2.1")
    assert [content[a:b] for a, b in spans] == ["京京京", "E-4821", "3.2.1"]

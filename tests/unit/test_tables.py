"""Tables as rows under their header in every office format (``adapters/parsers/tables.py``): merged
cells and multi-row headers resolved to the column names a reader says (``Revenue / 2024``), a
merged body cell repeated in the rows it spans, captions and title rows out of the header, every
data row located (table, row, page or paragraphs). The files are the ones the table bench uses
(tests/corpus/tables.py), written by python-docx, python-pptx and as HTML, Markdown and ODF XML."""

from __future__ import annotations

import time

import pytest

from tests.corpus.tables import CREDIT, REGIONS, WIDE, WRITERS
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.docx import table_markdown as docx_table_markdown
from ultimate_rag.adapters.parsers.tables import Cell, Row, table_blocks, table_markdown
from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument, SourceLocator

REGIONS_HEADER = "| Region | Segment | Revenue / 2024 | Revenue / 2025 | Cost / 2024 | Cost / 2025 |"


def parse(name: str) -> ParsedDocument:
    source = DocumentSource(None, name, "application/octet-stream", WRITERS[name]())
    return default_registry().resolve(source).parse(source)


def tables(parsed: ParsedDocument) -> list[Block]:
    return [b for b in parsed.blocks if b.kind == "table"]


def test_merged_header_cells_name_each_column_and_a_merged_body_cell_repeats() -> None:
    rows = [Row([Cell("Quarterly results", colspan=5)]),
            Row([Cell("Region", rowspan=2), Cell("Revenue", colspan=2), Cell("Cost", colspan=2)]),
            Row([Cell("2024"), Cell("2025"), Cell("2024"), Cell("2025")]),
            Row([Cell("North", rowspan=2), Cell("10"), Cell("12"), Cell("5"), Cell("6")]),
            Row([Cell("11"), Cell("13"), Cell("5"), Cell("7")]),
            Row([Cell("Total", colspan=2), Cell("21"), Cell("10"), Cell("13")])]
    (table,) = table_blocks(rows, table=3, locator=SourceLocator(page=7))
    assert (table.caption, table.locator.page) == ("Quarterly results", 7)
    assert table.text.split("\n") == [
        "| Region | Revenue / 2024 | Revenue / 2025 | Cost / 2024 | Cost / 2025 |", "|---|---|---|---|---|",
        "| North | 10 | 12 | 5 | 6 |", "| North | 11 | 13 | 5 | 7 |", "| Total |  | 21 | 10 | 13 |"]
    assert [(r.table, r.row_start, r.row_end, r.page) for r in table.rows] == [(3, 4, 4, 7), (3, 5, 5, 7), (3, 6, 6, 7)]
    assert (table.locator.table, table.locator.row_start, table.locator.row_end) == (3, 4, 6)


def test_a_docx_continuation_cell_takes_the_value_above() -> None:
    rows = [Row([Cell("Pier"), Cell("Ferry")]), Row([Cell("One"), Cell("Aurora")]),
            Row([Cell("", continued=True), Cell("Borealis")])]
    (table,) = table_blocks(rows)
    assert table.text.endswith("| One | Aurora |\n| One | Borealis |")


def test_a_row_of_years_under_a_group_is_a_header_but_a_row_of_numbers_is_data() -> None:
    years = [Row([Cell("Item"), Cell("Sales", colspan=2)]), Row([Cell(""), Cell("2024"), Cell("2025")]),
             Row([Cell("Rope"), Cell("1,200"), Cell("1,350")])]
    assert table_blocks(years)[0].text.split("\n")[0] == "| Item | Sales / 2024 | Sales / 2025 |"
    data = [Row([Cell("Item"), Cell("Sales", colspan=2)]), Row([Cell("Rope"), Cell("1,200"), Cell("1,350")])]
    (table,) = table_blocks(data)
    assert table.text.split("\n")[0] == "| Item | Sales | Sales |" and len(table.rows) == 1


def test_hostile_spans_are_bounded() -> None:
    rows = [Row([Cell("a", colspan=10**9, rowspan=10**9), Cell("b")])] + [Row([Cell(str(i))]) for i in range(3000)]
    start = time.monotonic()
    blocks = table_blocks(rows)
    assert time.monotonic() - start < 10 and blocks


def test_plain_grids_keep_the_old_markdown() -> None:
    assert docx_table_markdown is table_markdown
    assert table_markdown([["a", "b|c"], ["1"], ["", ""]]) == "| a | b\\|c |\n|---|---|\n| 1 |  |"
    assert table_markdown([["line\nbreak", "x"]]) == "| line break | x |\n|---|---|"


@pytest.mark.parametrize("name", ["tables.docx", "tables.html", "tables.pptx", "tables.odt", "tables.ods",
                                  "tables.xlsx"])
def test_every_format_resolves_the_same_columns(name: str) -> None:
    found = tables(parse(name))
    assert [t.text.split("\n")[0] for t in found] == [
        REGIONS_HEADER, "| " + " | ".join(c[0] for c in CREDIT.columns) + " |",
        "| " + " | ".join(c[0] for c in WIDE.columns) + " |"]
    regions, credit, _ = found
    assert regions.text.split("\n")[2:4] == ["| " + " | ".join(REGIONS.body[0]) + " |",
                                             "| " + " | ".join(REGIONS.body[1]) + " |"]  # "North" in both rows
    sheet = name in ("tables.ods", "tables.xlsx")  # a sheet is one table, its rows numbered from its title row
    assert [t.locator.table for t in found] == [1, 2, 3] or sheet
    first = 2 + 1 + sheet
    assert [r.row_start for r in regions.rows] == list(range(first, first + len(REGIONS.body)))
    assert len(credit.rows) == len(CREDIT.body)


@pytest.mark.parametrize("name", ["tables.docx", "tables.html", "tables.odt", "tables.pptx", "tables.md",
                                  "tables.ods", "tables.xlsx"])
def test_each_table_carries_its_caption(name: str) -> None:
    parsed = parse(name)
    assert [t.caption for t in tables(parsed)] == [spec.caption for spec in (REGIONS, CREDIT, WIDE)]
    assert not any(b.kind == "paragraph" and b.text == REGIONS.caption for b in parsed.blocks)


def test_slides_cite_the_slide_and_docx_rows_cite_their_paragraphs() -> None:
    slides = tables(parse("tables.pptx"))
    assert [t.locator.page for t in slides] == [1, 2, 3] and all(r.page == 2 for r in slides[1].rows)
    regions = tables(parse("tables.docx"))[0]
    starts = [r.paragraph_start or 0 for r in regions.rows]
    assert all(starts) and starts == sorted(starts) and 0 < (regions.locator.paragraph_start or 0) < starts[0]


def test_markdown_tables_cite_their_rows_and_lines() -> None:
    parsed = parse("tables.md")
    regions = tables(parsed)[0]
    first_line = regions.locator.line_start
    assert first_line is not None
    assert regions.text.split("\n")[0] == REGIONS_HEADER
    assert [(r.table, r.row_start, r.line_start) for r in regions.rows[:2]] == [
        (1, 2, first_line + 2), (1, 3, first_line + 3)]


def test_a_block_merged_over_rows_and_columns_repeats_down_its_first_column_only() -> None:
    """python-docx tbl-cell-access.docx: "4" merged over two rows and two columns."""
    rows = [Row([Cell("1"), Cell("2"), Cell("3")]), Row([Cell("4", colspan=2), Cell("6")]),
            Row([Cell("", colspan=2, continued=True), Cell("9")])]
    assert table_blocks(rows)[0].text.split("\n")[2:] == ["| 4 |  | 6 |", "| 4 |  | 9 |"]
    spans = [Row([Cell("1"), Cell("2"), Cell("3")]), Row([Cell("4", colspan=2, rowspan=2), Cell("6")]),
             Row([Cell("9")])]
    assert table_blocks(spans)[0].text.split("\n")[2:] == ["| 4 |  | 6 |", "| 4 |  | 9 |"]

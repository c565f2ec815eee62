"""Tables written in every office format from one specification, and the two measures of issue
"tables as rows under their header": cell recall (the share of the tables' words and numbers that
reach the chunks) and named numbers (the share of numeric cells that sit in a chunk that also
names their column as a reader would, every part of it: ``Revenue`` and ``2024``).

The specification is the reference extraction: what a reader sees in the rendered table. The
shapes are the ones that break naive readers: a two-row header whose top row groups columns
(``Revenue`` over ``2024 | 2025``), a header cell spanning both header rows, a body cell merged
over several rows, a caption row across the whole table, a long table that needs several chunks,
a wide table whose header alone is most of a chunk, and a CJK credit table (the shape of PyMuPDF's
chinese-tables.pdf).

    python -m tests.corpus.tables OUT_DIR      # writes every file into OUT_DIR
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import generate
from .measure import coverage, tokens

HeaderCell = tuple[str, int, int]  # text, colspan, rowspan


@dataclass(frozen=True)
class TableSpec:
    caption: str
    header: list[list[HeaderCell]]
    columns: list[tuple[str, ...]]  # each column's name parts, top down, as a reader says them
    body: list[list[str]]
    merge_first_column: bool = False  # equal neighbours in the first body column are one merged cell


def _number(i: int, j: int) -> str:
    value = (i * 7919 + j * 104729) % 899_000 + 1000
    text = f"{value // 100:,}.{value % 100:02d}"
    return text if "202" not in text else f"{value // 10:,}"


_REGIONS = ["North", "North", "South", "South", "East", "East", "West", "West", "Centre", "Centre",
            "Islands", "Islands", "Coast", "Coast", "Highlands", "Highlands"]
REGIONS = TableSpec(
    caption="Table 1: Revenue and cost by region (EUR thousand)",
    header=[[("Region", 1, 2), ("Segment", 1, 2), ("Revenue", 2, 1), ("Cost", 2, 1)],
            [("2024", 1, 1), ("2025", 1, 1), ("2024", 1, 1), ("2025", 1, 1)]],
    columns=[("Region",), ("Segment",), ("Revenue", "2024"), ("Revenue", "2025"), ("Cost", "2024"), ("Cost", "2025")],
    body=[[region, "Retail" if i % 2 == 0 else "Wholesale", *(_number(i, j) for j in range(4))]
          for i, region in enumerate(_REGIONS)],
    merge_first_column=True,
)
_BANKS = ["江苏银行", "中国银行", "工商银行", "建设银行", "农业银行", "交通银行", "招商银行", "浦发银行", "兴业银行", "中信银行"]
CREDIT = TableSpec(
    caption="单位：万元",
    header=[[("授信银行", 1, 1), ("授信总额", 1, 1), ("已使用额度", 1, 1), ("剩余额度", 1, 1)]],
    columns=[("授信银行",), ("授信总额",), ("已使用额度",), ("剩余额度",)],
    body=[[bank, _number(i, 7), _number(i, 8), _number(i, 9)] for i, bank in enumerate(_BANKS)],
)
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
WIDE = TableSpec(
    caption="Table 3: Monthly rainfall at the harbour stations",
    header=[[("Station", 1, 1), *((f"Rainfall in {m} (millimetres)", 1, 1) for m in _MONTHS)]],
    columns=[("Station",), *((f"Rainfall in {m} (millimetres)",) for m in _MONTHS)],
    body=[[f"Station {chr(65 + i)}", *(_number(i, 20 + j) for j in range(12))] for i in range(12)],
)
TABLES = (REGIONS, CREDIT, WIDE)


def _positions(rows: list[list[HeaderCell]]) -> list[list[tuple[int, HeaderCell]]]:
    """Where each header cell starts (HTML's table model: skip positions taken by cells above)."""
    taken: set[tuple[int, int]] = set()
    out = []
    for r, row in enumerate(rows):
        c, placed = 0, []
        for cell in row:
            while (r, c) in taken:
                c += 1
            placed.append((c, cell))
            taken |= {(r + dr, c + dc) for dr in range(cell[2]) for dc in range(cell[1])}
            c += cell[1]
        out.append(placed)
    return out


def _runs(spec: TableSpec) -> list[int]:
    """For each body row, how many rows its first cell spans (0: merged into the row above)."""
    spans = [1] * len(spec.body)
    if spec.merge_first_column:
        i = 0
        while i < len(spec.body):
            j = i
            while j + 1 < len(spec.body) and spec.body[j + 1][0] == spec.body[i][0]:
                j += 1
            spans[i] = j - i + 1
            spans[i + 1:j + 1] = [0] * (j - i)
            i = j + 1
    return spans


# -- writers -----------------------------------------------------------------------------------

def docx_file() -> bytes:
    import docx
    from docx.oxml import OxmlElement

    document = docx.Document()
    document.add_heading("Harbour annual report", level=1)
    for spec in TABLES:
        document.add_paragraph(spec.caption)
        width, height = len(spec.columns), len(spec.header) + len(spec.body)
        table = document.add_table(rows=height, cols=width)
        for r, placed in enumerate(_positions(spec.header)):
            for c, (text, colspan, rowspan) in placed:
                cell = table.cell(r, c)
                if colspan > 1 or rowspan > 1:
                    cell = cell.merge(table.cell(r + rowspan - 1, c + colspan - 1))
                cell.text = text
            table.rows[r]._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))
        top = len(spec.header)
        for i, (row, span) in enumerate(zip(spec.body, _runs(spec), strict=True)):
            for c, value in enumerate(row):
                if c == 0 and span == 0:
                    continue
                cell = table.cell(top + i, c)
                if c == 0 and span > 1:
                    cell = cell.merge(table.cell(top + i + span - 1, 0))
                cell.text = value
        document.add_paragraph("The figures are unaudited.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def html_file() -> bytes:
    parts = ["<html><head><title>Harbour annual report</title></head><body><h1>Harbour annual report</h1>"]
    for spec in TABLES:
        parts.append(f"<table><caption>{spec.caption}</caption><thead>")
        for placed in _positions(spec.header):
            parts.append("<tr>" + "".join(f'<th colspan="{cs}" rowspan="{rs}">{text}</th>'
                                          for _, (text, cs, rs) in placed) + "</tr>")
        parts.append("</thead><tbody>")
        for row, span in zip(spec.body, _runs(spec), strict=True):
            cells = [f'<td rowspan="{span}">{row[0]}</td>' if span else ""] + [f"<td>{v}</td>" for v in row[1:]]
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table><p>The figures are unaudited.</p>")
    parts.append("</body></html>")
    return "".join(parts).encode()


def markdown_file() -> bytes:
    """Markdown has no merged cells: the header names each column the way a reader would."""
    lines = ["# Harbour annual report", ""]
    for spec in TABLES:
        lines += [spec.caption, "", "| " + " | ".join(" / ".join(c) for c in spec.columns) + " |",
                  "|" + "---|" * len(spec.columns)]
        lines += ["| " + " | ".join(row) + " |" for row in spec.body]
        lines += ["", "The figures are unaudited.", ""]
    return "\n".join(lines).encode()


def pptx_file() -> bytes:
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for spec in TABLES:
        slide = presentation.slides.add_slide(presentation.slide_layouts[5])
        slide.shapes.title.text = spec.caption
        height = len(spec.header) + len(spec.body)
        table = slide.shapes.add_table(height, len(spec.columns), Inches(0.5), Inches(1.5), Inches(9),
                                       Inches(5)).table
        for r, placed in enumerate(_positions(spec.header)):
            for c, (text, colspan, rowspan) in placed:
                if colspan > 1 or rowspan > 1:
                    table.cell(r, c).merge(table.cell(r + rowspan - 1, c + colspan - 1))
                table.cell(r, c).text = text
        top = len(spec.header)
        for i, (row, span) in enumerate(zip(spec.body, _runs(spec), strict=True)):
            if span > 1:
                table.cell(top + i, 0).merge(table.cell(top + i + span - 1, 0))
            for c, value in enumerate(row):
                if not (c == 0 and span == 0):
                    table.cell(top + i, c).text = value
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def _odf_cell(text: str, colspan: int = 1, rowspan: int = 1, kind: str = "string") -> str:
    spans = (f' table:number-columns-spanned="{colspan}"' if colspan > 1 else "") + (
        f' table:number-rows-spanned="{rowspan}"' if rowspan > 1 else "")
    value = f' office:value-type="float" office:value="{text.replace(",", "")}"' if kind == "float" else \
        ' office:value-type="string"'
    return f"<table:table-cell{spans}{value}><text:p>{text}</text:p></table:table-cell>"


def _odf_rows(spec: TableSpec, spreadsheet: bool) -> str:
    width = len(spec.columns)
    covered: set[tuple[int, int]] = set()
    header_rows = []
    for r, placed in enumerate(_positions(spec.header)):
        cells: dict[int, str] = {}
        for c, (text, colspan, rowspan) in placed:
            cells[c] = _odf_cell(text, colspan, rowspan)
            covered |= {(r + dr, c + dc) for dr in range(rowspan) for dc in range(colspan)} - {(r, c)}
        line = "".join(cells.get(c, "<table:covered-table-cell/>" if (r, c) in covered else "<table:table-cell/>")
                       for c in range(width))
        header_rows.append(f"<table:table-row>{line}</table:table-row>")
    body_rows = []
    for row, span in zip(spec.body, _runs(spec), strict=True):
        first = "<table:covered-table-cell/>" if span == 0 else _odf_cell(row[0], rowspan=span)
        rest = "".join(_odf_cell(v, kind="float" if re.fullmatch(r"[\d,.]+", v) else "string") for v in row[1:])
        body_rows.append(f"<table:table-row>{first}{rest}</table:table-row>")
    if spreadsheet:  # a title row across the sheet, then the table
        title = f"<table:table-row>{_odf_cell(spec.caption, width)}{'<table:covered-table-cell/>' * (width - 1)}" \
                "</table:table-row>"
        return title + "".join(header_rows) + "".join(body_rows)
    return f"<table:table-header-rows>{''.join(header_rows)}</table:table-header-rows>{''.join(body_rows)}"


def odt_file() -> bytes:
    from tests.unit.office_builders import make_odf

    body = '<text:h text:outline-level="1">Harbour annual report</text:h>'
    for n, spec in enumerate(TABLES, start=1):
        body += (f"<text:p>{spec.caption}</text:p><table:table table:name=\"Table{n}\">"
                 f"<table:table-column table:number-columns-repeated=\"{len(spec.columns)}\"/>"
                 f"{_odf_rows(spec, False)}</table:table><text:p>The figures are unaudited.</text:p>")
    return make_odf("text", body)


def ods_file() -> bytes:
    from tests.unit.office_builders import make_odf

    body = "".join(f'<table:table table:name="Table {n}">{_odf_rows(spec, True)}</table:table>'
                   for n, spec in enumerate(TABLES, start=1))
    return make_odf("spreadsheet", body)


def xlsx_file(merged: bool = True) -> bytes:
    """One sheet per table: a title row merged across the sheet, the header's merged cells and the
    merged first body column as Excel merges them (values in each range's first cell only);
    ``merged=False``: the same values with no merge at all (grouping text over empty cells, as
    "centre across selection" leaves them)."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.worksheets[0])
    for n, spec in enumerate(TABLES, start=1):
        sheet = workbook.create_sheet(f"Table {n}")
        width = len(spec.columns)
        sheet.cell(1, 1, spec.caption)
        if merged:
            sheet.merge_cells(start_row=1, start_column=1, end_row=1, end_column=width)
        for r, placed in enumerate(_positions(spec.header), start=2):
            for c, (text, colspan, rowspan) in placed:
                sheet.cell(r, c + 1, text)
                if merged and (colspan > 1 or rowspan > 1):
                    sheet.merge_cells(start_row=r, start_column=c + 1, end_row=r + rowspan - 1,
                                      end_column=c + colspan)
        top = 2 + len(spec.header)
        for i, (row, span) in enumerate(zip(spec.body, _runs(spec), strict=True)):
            for c, value in enumerate(row):
                if not (c == 0 and span == 0):
                    sheet.cell(top + i, c + 1, value)
            if merged and span > 1:
                sheet.merge_cells(start_row=top + i, start_column=1, end_row=top + i + span - 1, end_column=1)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


WRITERS = {"tables.docx": docx_file, "tables.html": html_file, "tables.md": markdown_file,
           "tables.pptx": pptx_file, "tables.odt": odt_file, "tables.ods": ods_file, "tables.xlsx": xlsx_file,
           "tables-unmerged.xlsx": lambda: xlsx_file(merged=False)}


def write_all(directory: Path) -> list[Path]:
    return generate.write_all(directory, WRITERS)


# -- measures ----------------------------------------------------------------------------------

_NUMERIC = re.compile(r"^[\d,.]+$")


UNMERGED = "tables-unmerged.xlsx"  # its merged first column is a value over empty cells: said once


def reference_cells(specs: tuple[TableSpec, ...] = TABLES, merged: bool = True) -> str:
    """Every text a reader sees in the tables: captions, header cells, body cells (``merged``:
    a first-column value merged over several rows is read in each of them)."""
    return "\n".join(" ".join([spec.caption, *(t for row in spec.header for t, _, _ in row),
                               *(v for row, span in zip(spec.body, _runs(spec), strict=True)
                                 for k, v in enumerate(row) if merged or k or span)]) for spec in specs)


def cell_recall(chunk_texts: list[str], specs: tuple[TableSpec, ...] = TABLES, merged: bool = True) -> float:
    return coverage(tokens(reference_cells(specs, merged)), tokens("\n".join(chunk_texts)))


def numeric_cells(specs: tuple[TableSpec, ...] = TABLES) -> set[str]:
    return {value for spec in specs for row in spec.body for value in row if _NUMERIC.match(value)}


def named_numbers(chunk_texts: list[str], specs: tuple[TableSpec, ...] = TABLES) -> tuple[int, int]:
    """(numeric cells in a chunk that names every part of their column, numeric cells)."""
    named = total = 0
    for spec in specs:
        for row in spec.body:
            for value, parts in zip(row, spec.columns, strict=True):
                if not _NUMERIC.match(value):
                    continue
                total += 1
                named += any(value in text and all(part in text for part in parts) for text in chunk_texts)
    return named, total


def captioned_chunks(chunk_texts: list[str], specs: tuple[TableSpec, ...] = TABLES) -> tuple[int, int]:
    """(chunks holding a table's numeric cells that also say its caption, such chunks): later
    rows' chunks still say which table they are from."""
    said = total = 0
    for text in chunk_texts:
        for spec in specs:
            values = {v for row in spec.body for v in row if _NUMERIC.match(v)}
            if any(v in text for v in values):
                total += 1
                said += spec.caption in text
    return said, total


if __name__ == "__main__":
    for written in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(written)

"""Excel workbooks (XLSX) on openpyxl in read-only streaming mode with cached formula values
(``data_only=True``), its merged cells read from the sheet's XML (``sheet_merges.py``: read-only
mode does not report them): every sheet is a section (its name a heading, so it is in every chunk's
heading path) holding one Markdown table, its first non-empty row the header, like a CSV file.
Every data row keeps its locator: ``row_start``/``row_end`` are the sheet's own row numbers (as
Excel shows them), so a chunk cites its sheet and rows.

Strict OOXML workbooks (ISO/IEC 29500 Strict namespaces) are read like transitional ones
(``packages.transitional``). Hostile workbooks are bounded: the zip is checked first
(``packages.check_archive``), sheets are counted (``max_sheets``) and cells with a value are
counted as they stream (``max_cells``), and the sheet's declared dimension is ignored (a workbook
that claims a million columns yields only the cells it really has).
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument

from . import progress
from .limits import ParseLimits
from .packages import check_archive, transitional
from .sheet_merges import merged_rows, read_merges, sheet_parts
from .tables import Cell, Row, table_blocks

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class XlsxParser:
    extensions = (".xlsx",)
    name = "xlsx"
    version = "1.2.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".xlsx" and detected_kind == f"binary:{XLSX_MIME}"

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits, "XLSX")
        content = transitional(source.content, self.limits)  # Strict OOXML: the namespaces openpyxl reads
        import openpyxl  # only this parser needs it

        try:
            workbook = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
        except Exception as exc:
            raise InvalidDocumentError(f"the file is not a readable XLSX workbook ({exc})"[:300]) from exc
        archive = zipfile.ZipFile(io.BytesIO(content))
        try:
            sheets = [ws for ws in workbook.worksheets if hasattr(ws, "iter_rows")]
            check_sheet_count(len(workbook.sheetnames), self.limits)
            parts = sheet_parts(archive, self.limits)
            counter = CellCounter(self.limits)
            blocks: list[Block] = []
            for index, sheet in enumerate(sheets):
                progress.report(index, len(sheets))
                sheet.reset_dimensions()  # never trust the declared size
                values = ((cell.row, [cell.value for cell in row]) for row in sheet.iter_rows()
                          if (cell := _first_cell(row)) is not None)
                texts = list(counter.texts(values))
                merges = read_merges(archive, parts[sheet.title]) if sheet.title in parts else []
                blocks.extend(sheet_blocks(sheet.title, merged_rows(texts, merges)))
            progress.report(len(sheets), len(sheets))
        finally:
            archive.close()
            workbook.close()
        return ParsedDocument(blocks=tuple(blocks), metadata={"sheets": len(sheets), "cells": counter.cells})


def check_sheet_count(count: int, limits: ParseLimits) -> None:
    if count > limits.max_sheets:
        raise InvalidDocumentError(f"the workbook has {count} sheets, more than the limit of {limits.max_sheets}")


class CellCounter:
    """Counts the cells read across a workbook and fails it past ``max_cells``."""

    def __init__(self, limits: ParseLimits) -> None:
        self.limits = limits
        self.cells = 0

    def add(self, count: int) -> None:
        self.cells += count
        if self.cells > self.limits.max_cells:
            raise InvalidDocumentError(
                f"the workbook has more than {self.limits.max_cells} cells, the limit")

    def rows(self, rows: Iterable[tuple[int, Sequence[object]]]) -> Iterable[Row]:
        """Rows of values as table rows (see ``texts``)."""
        for number, texts in self.texts(rows):
            yield Row([Cell(text) for text in texts], number=number)

    def texts(self, rows: Iterable[tuple[int, Sequence[object]]]) -> Iterable[tuple[int, list[str]]]:
        """Rows of values as texts; only cells with a value count (a row padded with empty cells
        to the sheet's width costs nothing)."""
        for number, values in rows:
            texts = [cell_text(v) for v in values]
            self.add(sum(1 for text in texts if text))
            yield number, texts


def sheet_blocks(title: str, rows: Iterable[Row]) -> list[Block]:
    """A sheet's heading and table (``tables.py``): rows numbered as the sheet numbers them, the
    first non-empty row the header (with the rows under it when its cells are merged), a title
    row above it a paragraph."""
    found = table_blocks(list(rows), layout=False)
    if not found:
        return []
    return [Block(kind="heading", text=title or "Sheet", level=1), *found]


def cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").removesuffix(" 00:00:00").removesuffix("T00:00:00")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())


def _first_cell(row: Iterable[Any]) -> Any:
    """A cell of the row that knows its row number (read-only rows may start with empty cells)."""
    for cell in row:
        if getattr(cell, "row", None) is not None:
            return cell
    return None

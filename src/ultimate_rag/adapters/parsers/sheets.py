"""Excel workbooks (XLSX) on openpyxl in read-only streaming mode with cached formula values
(``data_only=True``): every sheet is a section (its name a heading, so it is in every chunk's
heading path) holding one Markdown table, its first non-empty row the header, like a CSV file.
Every data row keeps its locator: ``row_start``/``row_end`` are the sheet's own row numbers (as
Excel shows them), so a chunk cites its sheet and rows.

Hostile workbooks are bounded: the zip is checked first (``docx.check_archive``), sheets are
counted (``max_sheets``) and cells are counted as they stream (``max_cells``), and the sheet's
declared dimension is ignored (a workbook that claims a million columns yields only the cells it
really has).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterable, Sequence
from typing import Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument, SourceLocator

from . import progress
from .docx import check_archive, table_markdown
from .limits import ParseLimits

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class XlsxParser:
    extensions = (".xlsx",)
    name = "xlsx"
    version = "1.0.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".xlsx" and detected_kind == f"binary:{XLSX_MIME}"

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits, "XLSX")
        import openpyxl  # only this parser needs it

        try:
            workbook = openpyxl.load_workbook(io.BytesIO(source.content), read_only=True, data_only=True)
        except Exception as exc:
            raise InvalidDocumentError(f"the file is not a readable XLSX workbook ({exc})"[:300]) from exc
        try:
            sheets = [ws for ws in workbook.worksheets if hasattr(ws, "iter_rows")]
            check_sheet_count(len(workbook.sheetnames), self.limits)
            counter = CellCounter(self.limits)
            blocks: list[Block] = []
            for index, sheet in enumerate(sheets):
                progress.report(index, len(sheets))
                sheet.reset_dimensions()  # never trust the declared size
                rows = ((cell.row, [cell.value for cell in row]) for row in sheet.iter_rows()
                        if (cell := _first_cell(row)) is not None)
                blocks.extend(sheet_blocks(sheet.title, counter.rows(rows)))
            progress.report(len(sheets), len(sheets))
        finally:
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

    def rows(self, rows: Iterable[tuple[int, Sequence[object]]]) -> Iterable[tuple[int, list[str]]]:
        for number, values in rows:
            self.add(len(values))
            yield number, [cell_text(v) for v in values]


def sheet_blocks(title: str, rows: Iterable[tuple[int, list[str]]]) -> list[Block]:
    """A sheet's heading and table: (row number, cell texts) in, the first non-empty row the header."""
    kept: list[tuple[int, list[str]]] = []
    for number, cells in rows:
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            kept.append((number, cells))
    if not kept:
        return []
    first = kept[0][0]
    located = tuple(SourceLocator(row_start=n, row_end=n) for n, _ in kept[1:])
    table = table_markdown([cells for _, cells in kept])
    heading = Block(kind="heading", text=title or "Sheet", level=1)
    return [heading, Block(kind="table", text=table, rows=located,
                           locator=SourceLocator(row_start=first, row_end=kept[-1][0]))]


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

"""CSV and TSV: one Markdown pipe table per file, header first, with the locator of every data row
(its number and file lines). The chunker splits a table by rows and every part names its columns
(the header repeated, or ``column: value`` records for wide tables), so each chunk stands alone
and cites its rows."""

from __future__ import annotations

import csv
import io

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedDocument, SourceLocator

from .detect import decode_text
from .limits import ParseLimits
from .tables import table_markdown

_DELIMITERS = ",;|\t"


class CsvParser:
    extensions = (".csv", ".tsv")
    name = "csv"
    version = "1.1.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return detected_kind == "unknown" and source.extension in (".csv", ".tsv")

    def parse(self, source: DocumentSource) -> ParsedDocument:
        text, encoding = decode_text(source.content)
        delimiter = "\t" if source.extension == ".tsv" else _sniff(text)
        csv.field_size_limit(self.limits.max_csv_field_chars)
        rows: list[list[str]] = []
        spans: list[tuple[int, int]] = []  # file lines of each row (a quoted cell may span lines)
        try:
            reader = csv.reader(io.StringIO(text), delimiter=delimiter)
            last = 0
            for row in reader:
                cells = [" ".join(cell.split()) for cell in row]
                if any(cells):
                    rows.append(cells)
                    spans.append((last + 1, reader.line_num))
                last = reader.line_num
        except csv.Error as exc:
            raise InvalidDocumentError(f"the {source.extension[1:].upper()} file cannot be read: {exc}") from exc
        if not rows:
            raise InvalidDocumentError("the file has no rows")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        table = table_markdown(rows)
        located = tuple(SourceLocator(line_start=a, line_end=b, row_start=n, row_end=n)
                        for n, (a, b) in enumerate(spans[1:], start=1))
        block = Block(kind="table", text=table, rows=located,
                      locator=SourceLocator(line_start=1, line_end=lines, row_start=1 if located else None,
                                            row_end=len(located) or None))
        return ParsedDocument(
            blocks=(block,),
            metadata={"encoding": encoding, "delimiter": delimiter, "rows": len(rows) - 1,
                      "columns": rows[0]},
        )


def _sniff(text: str) -> str:
    sample = text[:65536]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return ","

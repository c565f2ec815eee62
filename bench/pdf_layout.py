"""The layout model on born-digital PDF pages (``pdf_layout.py``): what it costs and what it changes.

Every PDF of the regression corpus (committed and generated), the generated table and layout pages
of the tests, and — when the folder exists on this machine, never committed — the real files in
``/work/shared/realdocs`` are parsed and chunked twice in one run, with the model
(``ParseLimits.pdf_layout=True``, the default) and without it; OCR off. Per file: pages, pages
the model ran on, CPU seconds of the parse with and without (best of 3, in this process) and so
the model's CPU per page it ran on, recall and kept share of the reference words (as
tests/corpus/measure.py counts them), and what changed: image assets, assets described by a
caption, headings, table blocks, header/footer texts in the metadata.

    .venv/bin/python -m bench.pdf_layout [NAME ...]     # only the files whose name holds NAME
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.corpus.measure import Case, committed_cases, coverage, generated_cases, reference_text, run_case, tokens
from tests.unit.pdf_builders import chart_page_pdf, credit_table_pdf, photo_page_pdf, ruled_table_pdf

from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.parsers.limits import ParseLimits

REAL = Path("/work/shared/realdocs")


def _cases(tmp: Path) -> list[Case]:
    cases = [c for c in committed_cases() + generated_cases(tmp) if c.kind == "pdf"]
    builders = {"credit-table.pdf": lambda: credit_table_pdf()[0], "ruled-table.pdf": lambda: ruled_table_pdf()[0],
                "chart-page.pdf": chart_page_pdf, "photo-page.pdf": photo_page_pdf}
    for name, build in builders.items():
        path = tmp / name
        path.write_bytes(build())
        cases.append(Case(f"generated/{name}", path, "pdf"))
    if REAL.is_dir():
        cases += [Case(f"realdocs/{p.name}", p, "pdf") for p in sorted(REAL.glob("*.pdf"))]
    return cases


def _cpu(case: Case, count_tokens: Any, limits: ParseLimits) -> tuple[float, Any]:
    best: tuple[float, Any] | None = None
    for _ in range(3):
        start = time.process_time()
        outcome = run_case(case, count_tokens, limits=limits)
        spent = time.process_time() - start
        if best is None or spent < best[0]:
            best = (spent, outcome)
    assert best is not None
    return best


def _summary(outcome: Any, reference: Any) -> dict[str, Any]:
    parsed = outcome.parsed
    if parsed is None:
        return {"error": f"{outcome.error.__class__.__name__}"}
    furniture = parsed.metadata.get("page_furniture") or {}
    return {"recall": coverage(reference, tokens(outcome.chunk_text())),
            "kept": coverage(reference, tokens(outcome.kept_text())),
            "assets": len(parsed.assets), "described": sum(bool(a.description) for a in parsed.assets),
            "headings": sum(b.kind == "heading" for b in parsed.blocks),
            "tables": sum(b.kind == "table" for b in parsed.blocks),
            "edges": len(furniture.get("headers", ())) + len(furniture.get("footers", ())),
            "pages": int(parsed.metadata.get("page_count", 0)), "model": int(parsed.metadata.get("layout_pages", 0))}


def main() -> None:
    embedder = LocalE5Embedder()
    count_tokens = embedder.count_tokens
    print("| file | pages | model pages | CPU s off / on | model ms a page | recall off / on | kept off / on "
          "| assets (described) off / on | headings off / on | tables off / on | edge furniture off / on |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    total_off = total_on = 0.0
    model_pages = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in _cases(Path(tmp)):
            if sys.argv[1:] and not any(name in case.name for name in sys.argv[1:]):
                continue
            reference = tokens(reference_text(case))
            run_case(case, count_tokens, limits=ParseLimits(ocr="off"))  # warm: imports, fonts, the model
            off_s, off = _cpu(case, count_tokens, ParseLimits(ocr="off", pdf_layout=False))
            on_s, on = _cpu(case, count_tokens, ParseLimits(ocr="off"))
            a, b = _summary(off, reference), _summary(on, reference)
            if "error" in a or "error" in b:
                print(f"| {case.name} | {a.get('error', '')} / {b.get('error', '')} |")
                continue
            total_off, total_on, model_pages = total_off + off_s, total_on + on_s, model_pages + b["model"]
            per_page = f"{1000 * (on_s - off_s) / b['model']:.0f}" if b["model"] else "—"
            print(f"| {case.name} | {b['pages']} | {b['model']} | {off_s:.2f} / {on_s:.2f} | {per_page} "
                  f"| {a['recall']:.1%} / {b['recall']:.1%} | {a['kept']:.1%} / {b['kept']:.1%} "
                  f"| {a['assets']} ({a['described']}) / {b['assets']} ({b['described']}) "
                  f"| {a['headings']} / {b['headings']} | {a['tables']} / {b['tables']} | {a['edges']} / {b['edges']} |",
                  flush=True)
    if model_pages:
        print(f"\nall files: CPU {total_off:.2f} s without the model, {total_on:.2f} s with it; "
              f"{model_pages} pages ran it, {1000 * (total_on - total_off) / model_pages:.0f} ms of CPU each")


if __name__ == "__main__":
    main()

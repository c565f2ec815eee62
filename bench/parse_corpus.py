"""Parse quality and speed on the regression corpus (tests/corpus: real public files and the
generated PDFs), through what the worker runs: registry, parse checks, chunker with the local
model's tokenizer (chunk size 256, no overlap). Per file:

- characters extracted (our document text) and the reference extractor's (pypdf for PDF, the
  DOCX ``w:t`` runs, every CSV cell, readability's expected article for HTML), and recall: the
  share of reference tokens (words; CJK characters one by one) that reach the chunks;
- the share of chunks with a page (PDF) or row (CSV) locator, goal 100 %;
- the share of chunks under 15 characters, goal 0 (MDX: JSX tags and heading anchors are syntax);
- HTML main content: precision (share of our tokens in the expected article) and recall;
- pages/s for PDFs (parse and chunk, in process).

    .venv/bin/python -m bench.parse --corpus tests/corpus
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from tests.corpus.measure import (
    PAGED,
    TABULAR,
    THRESHOLDS,
    Case,
    Outcome,
    committed_cases,
    coverage,
    generated_cases,
    located_share,
    pdf_reference_pages,
    reference_text,
    run_case,
    tiny_chunks,
    tokens,
)

from ultimate_rag.adapters.embedders.local import LocalE5Embedder


def measure(outcome: Outcome) -> dict[str, object]:
    case = outcome.case
    reference = reference_text(case) if case.kind != "odt" else ""
    ref_tokens = tokens(reference)
    row: dict[str, object] = {"file": case.name, "kind": case.kind, "ref_chars": len(_squeeze(reference))}
    if outcome.error is not None:
        row["error"] = f"{outcome.error.__class__.__name__}: {outcome.error}"[:90]
        return row
    assert outcome.parsed is not None
    pages = len(pdf_reference_pages(case.path.read_bytes())) if case.kind == "pdf" else 0
    row.update(
        chars=len(_squeeze(outcome.parsed.text)), recall=coverage(ref_tokens, tokens(outcome.chunk_text())),
        chunks=len(outcome.chunks), located=located_share(outcome),
        tiny=len(tiny_chunks(outcome)) / len(outcome.chunks) if outcome.chunks else 0.0,
        seconds=outcome.seconds, pages=pages or outcome.parsed.metadata.get("page_count", 0))
    if case.kind == "html":
        row["precision"] = coverage(tokens(outcome.parsed.text), ref_tokens)
    return row


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _pct(value: object) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}"  # type: ignore[arg-type]


def run(root: Path) -> list[dict[str, object]]:
    embedder = LocalE5Embedder()
    embedder.count_tokens("warm up")  # load the tokenizer before timing
    with tempfile.TemporaryDirectory() as tmp:
        cases: list[Case] = committed_cases(root) + generated_cases(Path(tmp))
        rows = []
        for case in cases:
            run_case(case, embedder.count_tokens)  # warm: imports, fonts, first use of a library
            rows.append(measure(run_case(case, embedder.count_tokens)))
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    print("| file | chars | reference chars | recall % | chunks | located % | < 15 chars % | precision % | pages/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['file']} | {r['error']} | {r['ref_chars']} | | | | | | |")
            continue
        pps = f"{float(r['pages']) / float(r['seconds']):.0f}" if r["pages"] else "-"
        print(f"| {r['file']} | {r['chars']} | {r['ref_chars']} | {_pct(r['recall'])} | {r['chunks']} | "
              f"{_pct(r['located'])} | {_pct(r['tiny'])} | {_pct(r.get('precision'))} | {pps} |")
    print()
    ok = [r for r in rows if "error" not in r]
    for kind in ("pdf", "docx", "csv", "html", "md"):
        group = [r for r in ok if r["kind"] == kind]
        failed = [r["file"] for r in rows if r["kind"] == kind and "error" in r]
        if not group:
            continue
        below = sum(float(r["recall"]) < THRESHOLDS[kind] for r in group)
        chunks = sum(int(r["chunks"]) for r in group)
        tiny = sum(float(r["tiny"]) * int(r["chunks"]) for r in group)
        print(f"RESULT parse corpus {kind:4s}: {len(group)} files parsed, {len(failed)} failed{_listed(failed)}; "
              f"recall median {_pct(statistics.median(float(r['recall']) for r in group))} % "
              f"(min {_pct(min(float(r['recall']) for r in group))} %, {below} below {THRESHOLDS[kind]:.0%}); "
              f"chunks under 15 chars {_pct(tiny / chunks if chunks else 0)} % of {chunks}")
        if kind in PAGED | TABULAR:
            located = sum(float(r["located"]) * int(r["chunks"]) for r in group)
            print(f"RESULT parse corpus {kind:4s}: chunks with a {'page' if kind in PAGED else 'row'} locator "
                  f"{_pct(located / chunks if chunks else 0)} % (goal 100 %)")
        if kind == "pdf":
            pages = sum(int(r["pages"]) for r in group)
            seconds = sum(float(r["seconds"]) for r in group)
            print(f"RESULT parse corpus pdf : {pages} pages in {seconds:.2f} s = {pages / seconds:.0f} pages/s "
                  "(parse + chunk, in process)")
        if kind == "html":
            print(f"RESULT parse corpus html: main content precision mean "
                  f"{_pct(statistics.mean(float(r['precision']) for r in group))} %, "
                  f"recall mean {_pct(statistics.mean(float(r['recall']) for r in group))} % "
                  f"against readability's expected articles ({len(group)} pages)")


def _listed(names: list[object]) -> str:
    return f" ({', '.join(map(str, names))})" if names else ""


def main(root: Path) -> None:
    report(run(root))

"""Every document of the regression corpus (tests/corpus: public files committed under their
licences, and generated PDFs that reproduce files we may not commit) through the parser registry,
the parse runner's checks and the chunker, with the real model's tokenizer, as the worker runs
them. Per file: no body text lost against a reference extraction (thresholds and why in
tests/corpus/measure.py), no fragment chunks, a page or row locator on every chunk of a paged or
tabular format, no control characters, and the defect each file was chosen for (README.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.corpus.generate import GENERATORS
from tests.corpus.measure import (
    JSX_LINE,
    PAGED,
    TABULAR,
    THRESHOLDS,
    TINY,
    Case,
    Outcome,
    committed_cases,
    control_characters,
    coverage,
    generated_cases,
    located_share,
    missing_sample,
    reference_text,
    run_case,
    tiny_chunks,
    tokens,
)
from tests.corpus.tables import UNMERGED, captioned_chunks, cell_recall, named_numbers, numeric_cells
from tests.corpus.tables import WRITERS as TABLE_WRITERS
from tests.corpus.tables import write_all as write_tables
from ultimate_rag.domain.errors import InvalidDocumentError, UnsupportedFormatError

COMMITTED = {case.name: case for case in committed_cases()}
NAMES = sorted(COMMITTED) + [f"generated/{name}" for name in GENERATORS]
UNREADABLE = "generated/letter-shifted.pdf"  # its text layer is garbage: reported, not compared
REFUSED = {"odt/source.odt"}  # a format without a parser: refused with a reason
PARSED = [n for n in NAMES if n not in REFUSED]
WITH_IMAGES = ["pdf/inline-image.pdf", "pdf/cmyk-image.pdf", "generated/image-only.pdf"]
ANCHOR_REMAINS = re.compile(r"\{/\*?[\w-]+\*?/\}")  # {/*id*/}, or {/id/} once Markdown took the * for emphasis
# Share of our tokens found in the article. readability-lxml with the title and headings kept
# reaches 0.84-0.99 on these pages; the whole page (navigation, sidebars, comments) 0.22-0.86.
HTML_PRECISION = 0.80


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    generated = generated_cases(Path(tmp_path_factory.mktemp("generated")))
    return COMMITTED | {case.name: case for case in generated}


class _Outcomes(dict[str, Outcome]):
    """Each file parsed and chunked once, on first use."""

    def __init__(self, cases: dict[str, Case], count_tokens: Callable[[str], int]) -> None:
        super().__init__()
        self._cases, self._count = cases, count_tokens

    def __missing__(self, name: str) -> Outcome:
        self[name] = run_case(self._cases[name], self._count)
        return self[name]


@pytest.fixture(scope="module")
def outcomes(cases: dict[str, Case], embedder) -> dict[str, Outcome]:
    return _Outcomes(cases, embedder.count_tokens)


def parsed_ok(outcome: Outcome) -> Outcome:
    if outcome.error is not None:
        pytest.fail(f"{outcome.case.name} was not indexed: {outcome.error.__class__.__name__}: {outcome.error}")
    return outcome


@pytest.mark.parametrize("name", [n for n in PARSED if n != UNREADABLE])
def test_no_body_text_is_lost(name: str, cases: dict[str, Case], outcomes: dict[str, Outcome]) -> None:
    case, outcome = cases[name], parsed_ok(outcomes[name])
    # running headers and footers are kept as the document's metadata, not embedded: not lost
    reference, found = tokens(reference_text(case)), tokens(outcome.kept_text())
    assert outcome.chunks or not reference, f"{name}: no chunks"
    share = coverage(reference, found)
    assert share >= THRESHOLDS[case.kind], (
        f"{name}: {share:.1%} of {sum(reference.values())} reference tokens reach the chunks "
        f"(at least {THRESHOLDS[case.kind]:.0%} needed); missing e.g. {missing_sample(reference, found)}")


@pytest.mark.parametrize("name", [n for n in PARSED if n != UNREADABLE])
def test_no_fragment_chunks(name: str, outcomes: dict[str, Outcome]) -> None:
    outcome = parsed_ok(outcomes[name])
    tiny = tiny_chunks(outcome)
    assert not tiny, f"{name}: {len(tiny)} of {len(outcome.chunks)} chunks under {TINY} characters: {tiny[:10]}"


@pytest.mark.parametrize("name", [n for n in PARSED if n.rsplit(".", 1)[-1] in PAGED | TABULAR and n != UNREADABLE])
def test_every_chunk_has_a_page_or_row_locator(name: str, outcomes: dict[str, Outcome]) -> None:
    outcome = parsed_ok(outcomes[name])
    share = located_share(outcome)
    what = "page" if outcome.case.kind in PAGED else "row range"
    assert share == 1.0, f"{name}: {share:.0%} of {len(outcome.chunks)} chunks cite a {what}"


@pytest.mark.parametrize("name", PARSED)
def test_no_control_characters_reach_a_chunk(name: str, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[name]
    if outcome.error is not None:  # a refusal is fine here, as long as it is not a database error
        assert isinstance(outcome.error, InvalidDocumentError), repr(outcome.error)
        return
    found = control_characters(outcome)
    assert not found, f"{name}: {len(found)} chunks hold control characters, e.g. {found[:3]}"


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("html/")])
def test_html_keeps_the_main_content_only(name: str, cases: dict[str, Case], outcomes: dict[str, Outcome]) -> None:
    """Precision against readability's expected article: navigation, comments and sidebars out."""
    case, outcome = cases[name], parsed_ok(outcomes[name])
    assert case.expected is not None and outcome.parsed is not None
    ours, expected = tokens(outcome.parsed.text), tokens(reference_text(case))
    precision = coverage(ours, expected)
    assert precision >= HTML_PRECISION, (
        f"{name}: {precision:.1%} of our {sum(ours.values())} tokens are in the article "
        f"({len(outcome.chunks)} chunks); more often than in it e.g. {missing_sample(ours, expected)}")


@pytest.mark.parametrize("name", WITH_IMAGES)
def test_images_are_extracted(name: str, outcomes: dict[str, Outcome]) -> None:
    """Inline images (BI … EI in the content stream) as well as referenced ones."""
    outcome = parsed_ok(outcomes[name])
    assert outcome.parsed is not None and outcome.parsed.assets, f"{name}: no image extracted"


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith(".md")])
def test_mdx_syntax_is_not_indexed(name: str, outcomes: dict[str, Outcome]) -> None:
    """JSX tags on lines of their own (``</Sandpack>``) and ``{/*anchor*/}`` heading ids are syntax."""
    outcome = parsed_ok(outcomes[name])
    text = outcome.chunk_text() + "\n" + "\n".join(" > ".join(c.heading_path) for c in outcome.chunks)
    anchors = ANCHOR_REMAINS.findall(text)
    assert not anchors, f"{name}: heading anchors indexed (whole or mangled): {anchors[:8]}"
    tags = [m.group(0).strip() for m in JSX_LINE.finditer(text)]
    assert not tags, f"{name}: JSX tags indexed: {tags[:8]}"


def test_an_unreadable_text_layer_is_reported(outcomes: dict[str, Outcome]) -> None:
    """A font without a Unicode map gives letter-shifted text: the document says so (a note in its
    metadata) or fails with a readable reason, instead of indexing the garbage as READY."""
    outcome = outcomes[UNREADABLE]
    if outcome.error is not None:
        assert isinstance(outcome.error, InvalidDocumentError), repr(outcome.error)
        assert "text" in str(outcome.error).lower(), str(outcome.error)
        return
    assert outcome.parsed is not None
    notes = " ".join(_strings(outcome.parsed.metadata)).lower()
    assert any(word in notes for word in ("unreadable", "not extractable", "unicode", "garbled")), (
        f"indexed without a word about its text layer: metadata {outcome.parsed.metadata}, "
        f"text {outcome.parsed.text[:80]!r}")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_unsupported_format_is_refused_naming_the_supported_ones(name: str, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[name]
    if outcome.error is None:  # a parser for it arrived: then its text must all be there
        share = coverage(tokens(reference_text(outcome.case)), tokens(outcome.chunk_text()))
        assert share >= 0.99, f"{name}: {share:.1%} of its text indexed"
        return
    assert isinstance(outcome.error, UnsupportedFormatError), repr(outcome.error)
    reason = str(outcome.error).lower()
    assert "pdf" in reason and "docx" in reason, f"the reason does not list the supported formats: {reason}"


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.fixture(scope="module")
def table_outcomes(tmp_path_factory: pytest.TempPathFactory, embedder) -> dict[str, Outcome]:
    directory = Path(tmp_path_factory.mktemp("tables"))
    return {path.name: run_case(Case(path.name, path, path.suffix.lstrip(".")), embedder.count_tokens)
            for path in write_tables(directory)}


@pytest.mark.parametrize("name", sorted(TABLE_WRITERS))
def test_table_cells_reach_chunks_that_name_their_columns(name: str, table_outcomes: dict[str, Outcome]) -> None:
    """tests/corpus/tables.py: every cell reaches a chunk, every number sits in a chunk that names
    every part of its column (``Revenue`` and ``2024``), and every chunk with table cells cites rows
    and says its table's caption."""
    outcome = parsed_ok(table_outcomes[name])
    texts = [f"{c.context}\n{c.content}" for c in outcome.chunks]
    recall = cell_recall(texts, merged=name != UNMERGED)
    assert recall >= 0.995, f"{name}: cell recall {recall:.1%}"
    named, total = named_numbers(texts)
    assert named == total, f"{name}: {total - named} of {total} numbers in a chunk without their column's name"
    values = numeric_cells()
    unlocated = [c.content[:60] for c in outcome.chunks if any(v in c.content for v in values)
                 and c.locator.row_start is None]
    assert not unlocated, f"{name}: chunks with table cells and no rows cited: {unlocated[:3]}"
    said, holding = captioned_chunks(texts)
    assert said == holding, f"{name}: {holding - said} of {holding} chunks with a table's numbers lack its caption"

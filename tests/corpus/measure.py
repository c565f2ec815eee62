"""The regression corpus as cases, a reference extraction for each, and the measures that the
corpus test (tests/integration/test_regression_corpus.py) and ``bench/parse --corpus`` share.

A case goes through what the worker runs: the parser registry picks the parser, the parse
runner (in-process) applies the checks every parse result passes, and the structured chunker
splits it with the embedder's tokenizer. Reference texts come from other extractors: pypdf for
PDF (PyMuPDF's plain text where pypdf is missing), the ``w:t`` runs of the DOCX XML, every CSV
cell, readability's expected output for the HTML pages, and the MDX source without its syntax.
"""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import re
import time
import unicodedata
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.domain.models import Chunk, DocumentSource, ParsedDocument

from .generate import write_all

CORPUS = Path(__file__).resolve().parent
PAGED = {"pdf"}
TABULAR = {"csv"}
TINY = 15  # characters: a chunk shorter than this is a fragment (unless the whole document is)

# Share of reference tokens that must reach the chunks, per file type, and why a correct parser
# meets it. Tokens are words (casefolded, NFKC) and single CJK characters, counted with repeats.
THRESHOLDS = {
    # pypdf and MuPDF agree to >= 99 % on every PDF here; what differs is hyphenation at line ends
    # and words split or joined by kerning, never whole lines.
    "pdf": 0.97,
    # The w:t runs are the text; all of it is body text (headers and footers are not counted).
    "docx": 0.99,
    # Every cell value is data: none may be lost (a header may be abbreviated but not dropped).
    "csv": 1.0,
    # Prose we wrote (tests/corpus/generate.py): every word of it, and of its code, is content.
    "md": 0.99,
    # readability's expected output is one main-content extractor's opinion; another maintained
    # one (readability-lxml, trafilatura) finds >= 90 % of its words on these pages.
    "html": 0.90,
}


# Where readability.js's expected output keeps a sidebar after the article, the article's last
# words: the reference stops there (hukumusume: trivia, horoscope and links to other stories make
# half of its expected words; a parser that keeps the story and drops those is right).
ARTICLE_END = {"html/hukumusume/source.html": "おしまい"}


@dataclass(frozen=True)
class Case:
    name: str  # how a failure names it: the path under tests/corpus (or generated/...)
    path: Path
    kind: str  # pdf | docx | csv | html | odt
    expected: Path | None = None  # readability's expected.html for an HTML page

    @property
    def generated(self) -> bool:
        return self.name.startswith("generated/")


def committed_cases(root: Path = CORPUS) -> list[Case]:
    cases = []
    for path in sorted(root.rglob("*")):
        kind = path.suffix.lstrip(".").lower()
        if not path.is_file() or kind not in ("pdf", "docx", "csv", "odt", "html") or path.name == "expected.html":
            continue
        expected = path.with_name("expected.html") if kind == "html" else None
        cases.append(Case(str(path.relative_to(root)), path, kind, expected))
    return cases


def generated_cases(directory: Path) -> list[Case]:
    return [Case(f"generated/{p.name}", p, p.suffix.lstrip(".")) for p in write_all(directory)]


# -- reference texts ---------------------------------------------------------------------------

def reference_text(case: Case) -> str:
    data = case.path.read_bytes()
    if case.kind == "pdf":
        return "\n".join(pdf_reference_pages(data))
    if case.kind == "docx":
        return docx_reference(data)
    if case.kind == "csv":
        return "\n".join(" ".join(row) for row in csv_cells(data))
    if case.kind == "html":
        assert case.expected is not None
        text = html_text(case.expected.read_bytes())
        end = ARTICLE_END.get(case.name)
        return text[:text.index(end) + len(end)] if end else text
    if case.kind == "md":
        return markdown_reference(data.decode("utf-8"))
    if case.kind == "odt":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return " ".join(etree.fromstring(z.read("content.xml")).itertext())
    raise ValueError(case.kind)


def pdf_reference_pages(data: bytes) -> list[str]:
    """pypdf's text per page (it needs fontTools for CFF fonts, pinned beside it); PyMuPDF's plain
    text where pypdf is missing or cannot read the file (when PyMuPDF is installed); no pages
    where neither can. A page's first or last line that is only its page number is not body text
    (the parser drops page numbers: pdf_furniture.py), so it is not counted."""
    try:
        import pypdf

        logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # it warns on every odd font
        return [_without_page_number(page.extract_text() or "") for page in pypdf.PdfReader(io.BytesIO(data)).pages]
    except Exception:  # ImportError, or a file pypdf cannot open
        pass
    try:
        import pymupdf

        with pymupdf.open(stream=data, filetype="pdf") as doc:
            return [_without_page_number(page.get_text("text")) for page in doc]
    except Exception:
        return []


_PAGE_NUMBER_LINE = re.compile(r"^\s*(?:page\s*)?[-–]?\s*(?:\d{1,4}|[ivxlc]{1,6})\s*[-–]?(?:\s*(?:of|/)\s*\d{1,4})?\s*$",
                               re.IGNORECASE)


def _without_page_number(text: str) -> str:
    lines = text.strip().split("\n")
    for index in (0, -1):
        if lines and _PAGE_NUMBER_LINE.match(lines[index]):
            lines.pop(index)
    return "\n".join(lines)


W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
DOCX_PARTS = re.compile(r"word/(document|footnotes|endnotes|comments)\d*\.xml")


def docx_reference(data: bytes) -> str:
    """Every ``w:t`` of the body, footnotes, endnotes and comments (headers and footers are a
    product decision, so they are not required)."""
    texts: list[str] = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in sorted(n for n in z.namelist() if DOCX_PARTS.fullmatch(n)):
            root = etree.fromstring(z.read(name))
            texts.extend(t.text or "" for t in root.iter(f"{W}t"))
    return " ".join(texts)


def csv_cells(data: bytes) -> list[list[str]]:
    text = data.decode("utf-8-sig")
    return [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]


_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
JSX_LINE = re.compile(r"^[ \t]*</?[A-Z][A-Za-z0-9]*(?:\s[^>]*)?/?>[ \t]*$", re.M)
MDX_ANCHOR = re.compile(r"\{/\*.*?\*/\}")


def markdown_reference(text: str) -> str:
    """MDX without its syntax: no front matter (metadata), JSX tag lines or heading anchors."""
    return MDX_ANCHOR.sub("", JSX_LINE.sub("", _FRONT_MATTER.sub("", text)))


def html_text(data: bytes) -> str:
    """The text of an HTML file (readability's pages are UTF-8 and do not all say so)."""
    root = lxml_html.fromstring(data.decode("utf-8", errors="replace"))
    for bad in root.xpath("//script|//style|//noscript"):
        bad.drop_tree()
    return " ".join(root.itertext())


# -- tokens and coverage -------------------------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W\\d_{_CJK}]+|\\d+")


_HYPHEN_BREAK = re.compile(r"(\w)-\s+(\w)")


def tokens(text: str) -> Counter[str]:
    """Runs of letters and runs of digits (NFKC, casefolded) and single CJK characters, with their
    counts. Letters and digits apart, because extractors disagree on the spaces in ``x2``; a word
    hyphenated at a line end is one word, whether a parser joined it or not."""
    text = _HYPHEN_BREAK.sub(r"\1\2", unicodedata.normalize("NFKC", text))
    return Counter(_TOKEN.findall(text.casefold()))


def coverage(reference: Counter[str], found: Counter[str]) -> float:
    """Share of the reference tokens (with repeats) present in ``found``; 1.0 for an empty reference."""
    total = sum(reference.values())
    if not total:
        return 1.0
    return sum(min(n, found[t]) for t, n in reference.items()) / total


def missing_sample(reference: Counter[str], found: Counter[str], limit: int = 12) -> list[str]:
    return [t for t, n in reference.most_common() if found[t] < n][:limit]


# -- the pipeline ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    case: Case
    parser: str = ""
    parsed: ParsedDocument | None = None
    chunks: list[Chunk] = field(default_factory=list)
    error: BaseException | None = None
    seconds: float = 0.0

    def chunk_text(self) -> str:
        """What reaches the index: each chunk's embedded context (its headings) and content."""
        return "\n".join(f"{getattr(c, 'context', '')}\n{c.content}" for c in self.chunks)

    def kept_text(self) -> str:
        """What the document keeps: its chunks, and the page furniture (running headers and
        footers) and contents entries that a PDF keeps as metadata instead of embedding them."""
        metadata = self.parsed.metadata if self.parsed is not None else {}
        furniture = metadata.get("page_furniture") or {}
        kept = [*furniture.get("headers", ()), *furniture.get("footers", ()),
                *(f"{entry.get('title', '')} {entry.get('page', '')}" for entry in metadata.get("contents") or ())]
        return "\n".join([self.chunk_text(), *kept])


def run_case(case: Case, count_tokens: Callable[[str], int], *, chunk_size: int = 256,
             overlap: int = 0, limits: ParseLimits | None = None) -> Outcome:
    """Parse and chunk one file as the worker does (the default chunk size; no overlap, so that a
    repeated sentence cannot hide a lost one); an error is kept, not raised. ``limits`` chooses
    the PDF engine (``pdf_engine``), among others."""
    registry = default_registry(limits)
    runner = ParseRunner(isolate=False)
    source = DocumentSource(uuid.uuid4(), case.path.name, "application/octet-stream", case.path.read_bytes())
    outcome = Outcome(case)
    start = time.perf_counter()
    try:
        parser = registry.resolve(source)
        outcome.parser = parser.name
        outcome.parsed = asyncio.run(runner.parse(parser, source))
        outcome.chunks = StructuredChunker(count_tokens).split(
            outcome.parsed, document_id=source.document_id or uuid.uuid4(), knowledge_base_id=uuid.uuid4(),
            revision=1, chunk_size=chunk_size, overlap=overlap)
    except Exception as exc:  # kept: reported per case
        outcome.error = exc
    outcome.seconds = time.perf_counter() - start
    return outcome


def has_page(chunk: Chunk) -> bool:
    loc: Any = chunk.locator
    return loc.page is not None or getattr(loc, "page_start", None) is not None


def has_rows(chunk: Chunk, total_lines: int) -> bool:
    """A row range of its own: ``row_start``, or a line range narrower than the whole file."""
    loc: Any = chunk.locator
    if getattr(loc, "row_start", None) is not None:
        return True
    return loc.line_start is not None and (loc.line_start, loc.line_end) != (1, total_lines)


def located_share(outcome: Outcome) -> float | None:
    """Share of chunks with a page (paged formats) or row (tabular) locator; None for others."""
    if not outcome.chunks or outcome.case.kind not in PAGED | TABULAR:
        return None
    if outcome.case.kind in PAGED:
        return sum(map(has_page, outcome.chunks)) / len(outcome.chunks)
    text = outcome.case.path.read_bytes().decode("utf-8-sig")
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return sum(has_rows(c, lines) for c in outcome.chunks) / len(outcome.chunks)


def tiny_chunks(outcome: Outcome) -> list[str]:
    """Chunks under TINY characters, unless the whole document text is that short."""
    if outcome.parsed is None or len(outcome.parsed.text.strip()) < TINY:
        return []
    return [c.content for c in outcome.chunks if len(c.content.strip()) < TINY]


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def control_characters(outcome: Outcome) -> list[str]:
    return [repr(c.content[max(0, m.start() - 20):m.end() + 20])
            for c in outcome.chunks for m in [_CONTROL.search(c.content)] if m]

"""HTML main-content precision and recall against mozilla/readability's test pages (issue 11,
item 9). Each page directory holds ``source.html`` and the ``expected.html`` article; tokens (words,
and single characters for Chinese, Japanese and Korean) of our extracted text are compared with the
expected article's as multisets: precision = shared / ours, recall = shared / expected, averaged
over pages. The pages are not committed (third-party web pages); point the script at a checkout:

    git -C <mirror of mozilla/readability> archive HEAD test/test-pages | tar -x -C /tmp/rtp
    .venv/bin/python -m bench.html_main /tmp/rtp/test/test-pages [--libraries]

``--libraries`` also measures trafilatura's and readability-lxml's plain text output (install
trafilatura yourself; it is not a dependency).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import lxml.html

from ultimate_rag.adapters.parsers import html as parser
from ultimate_rag.adapters.parsers.assets import AssetGate
from ultimate_rag.adapters.parsers.html_walk import Walker
from ultimate_rag.domain.models import DocumentSource

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"\w+")


def tokens(text: str) -> Counter[str]:
    text = text.casefold()
    return Counter(_CJK.findall(text) + _WORD.findall(_CJK.sub(" ", text)))


def html_text(markup: str) -> str:
    root = lxml.html.document_fromstring(markup)
    for element in root.xpath("//script|//style"):
        element.drop_tree()
    return root.text_content()


def _source(content: bytes) -> DocumentSource:
    return DocumentSource(None, "page.html", "text/html", content)


def full_page(content: bytes) -> str:
    """The 1.0.0 behaviour, kept as the fallback: the whole page minus navigation and the like."""
    html = parser.HtmlParser()
    root, _ = html._load(_source(content))
    parser.strip_page(root)
    walker = Walker(AssetGate(html.limits))
    walker.walk(parser.page_content(root))
    return "\n".join(b.text for b in walker.blocks)


def current(content: bytes) -> str:
    return parser.HtmlParser().parse(_source(content)).text


def trafilatura_text(content: bytes) -> str:
    import trafilatura

    return trafilatura.extract(content.decode("utf-8", "replace"), include_tables=True, include_comments=False,
                               favor_recall=True) or ""


def readability_text(content: bytes) -> str:
    from readability import Document

    return html_text(Document(content.decode("utf-8", "replace")).summary())


def measure(pages: Path, extractors: dict[str, Callable[[bytes], str]]) -> None:
    scores: dict[str, list[tuple[str, float, float]]] = {name: [] for name in extractors}
    for directory in sorted(p for p in pages.iterdir() if (p / "expected.html").exists()):
        content = (directory / "source.html").read_bytes()
        expected = tokens(html_text((directory / "expected.html").read_text("utf-8")))
        for name, extract in extractors.items():
            try:
                got = tokens(extract(content))
            except Exception:
                got = Counter()
            shared = sum((got & expected).values())
            scores[name].append((directory.name, shared / max(1, sum(got.values())),
                                 shared / max(1, sum(expected.values()))))
    print("| extractor | pages | precision | recall | F1 | pages with recall < 0.5 |")
    print("|---|---|---|---|---|---|")
    for name, rows in scores.items():
        n = len(rows)
        p = sum(r[1] for r in rows) / n
        r = sum(r[2] for r in rows) / n
        f1 = sum(2 * a * b / (a + b) if a + b else 0.0 for _, a, b in rows) / n
        print(f"| {name} | {n} | {p:.3f} | {r:.3f} | {f1:.3f} | {sum(1 for row in rows if row[2] < 0.5)} |")


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("pages", type=Path)
    args.add_argument("--libraries", action="store_true")
    ns = args.parse_args()
    extractors: dict[str, Callable[[bytes], str]] = {"full page (fallback)": full_page,
                                                     f"html {parser.HtmlParser.version}": current}
    if ns.libraries:
        extractors |= {"trafilatura (plain)": trafilatura_text, "readability-lxml (plain)": readability_text}
    measure(ns.pages, extractors)


if __name__ == "__main__":
    main()

"""Main-content extraction for HTML pages with readability-lxml, and the rule that decides when a
page has no identifiable main content (then ``html.py`` indexes the full page instead)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from readability import Document  # imported at module level: the parse forkserver preloads it
from readability.htmls import shorten_title

from ultimate_rag.domain.models import Block

from .assets import AssetGate
from .html_walk import Walker

if TYPE_CHECKING:
    from lxml.html import HtmlElement

MIN_PAGE_WORDS = 120  # a shorter page is indexed whole: there is nothing to gain and text to lose
MIN_SHARE = 0.15  # main content under this share of the page's words is not main content
logging.getLogger("readability.readability").setLevel(logging.CRITICAL)  # it logs every failure


class _Reader(Document):
    """readability's rules, except that tables and lists of text (not of links) inside the article
    are kept: its conditional cleaning drops short data tables and lists, which are content here."""

    def get_preserved_elements(self, node: Any) -> Any:  # readability ships no types
        allowed = super().get_preserved_elements(node)
        for element in self.tags(node, "table", "ul", "ol"):
            if element.tag == "table" or self.get_link_density(element) < 0.5:
                allowed[element] = True
        return allowed


def main_content(original: HtmlElement, page_blocks: list[Block], gate: AssetGate) -> Walker | None:
    """The page's main content as blocks (the page title first when it has no ``<h1>``), or None
    when there is none to trust."""
    page_words = words(page_blocks)
    if page_words < MIN_PAGE_WORDS:
        return None
    import lxml.html

    from .html import safe_parser

    title = _title(original)
    try:
        summary = _Reader(original).summary(html_partial=True)
        article = lxml.html.document_fromstring(summary, parser=safe_parser())
    except Exception:  # readability.Unparseable or a page it cannot handle: the full page it is
        return None
    walker = Walker(gate)
    body = article.find(".//body")
    walker.walk(body if body is not None else article)
    if words(walker.blocks) < MIN_SHARE * page_words:
        return None
    if title and not any(b.kind == "heading" and (b.level == 1 or _norm(b.text) == _norm(title))
                         for b in walker.blocks):
        walker.blocks.insert(0, Block(kind="heading", text=title, level=1))
    return walker


def words(blocks: list[Block]) -> int:
    """Words of space-separated scripts plus CJK characters (which have no spaces between words)."""
    return sum(len(b.text.split()) + sum(1 for ch in b.text if "\u3040" <= ch <= "\ud7af")
               for b in blocks if b.kind != "figure")


def _title(original: HtmlElement) -> str:
    """The ``<title>`` without the site's name (readability's rule; it prefers a matching heading)."""
    try:
        return " ".join((shorten_title(original) or "").split())
    except Exception:
        return ""


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())

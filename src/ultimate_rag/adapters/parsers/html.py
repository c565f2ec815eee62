"""HTML parser: the page's main content found by readability-lxml (the Python port of the
algorithm Firefox's Reader View uses), turned into Blocks by ``html_walk.py`` — title and headings
with their levels, paragraphs, lists, tables, code, and ``data:`` images as assets (remote images
by their alt text; nothing is ever fetched).

When a page has no identifiable main content (a short page, a page that is one table or one list,
a page where the extraction keeps only a sliver of the text), the full page is indexed instead,
minus scripts, styles, navigation, page headers/footers, asides, forms and hidden elements: a
document's text is never lost to the extraction. ``docs/formats.md`` has the measurements.

lxml's HTML parser never expands entities or loads external resources (``no_network``); the page
is parsed once, by us, and readability works on a copy of that tree (with navigation and hidden parts
already dropped, which measured slightly better than the raw page). The element walk is iterative
and a document nested deeper than the limit fails with a reason (libxml2 silently drops content
below 255 levels, which would index a truncated page).
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource, ParsedDocument

from .assets import AssetGate, with_warnings
from .detect import decode_text
from .html_main import main_content
from .html_walk import Walker, numbered
from .limits import ParseLimits
from .table_captions import attach_captions

if TYPE_CHECKING:  # lxml.html is imported where it is used (parse workers preload it)
    from lxml.html import HtmlElement, HTMLParser

HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
_DROP = {"script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe",
         "svg", "button", "select", "object", "embed", "canvas", "dialog", "menu"}
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)


class HtmlParser:
    extensions = tuple(sorted(HTML_EXTENSIONS))
    name = "html"
    version = "2.2.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return detected_kind == "unknown" and source.extension in HTML_EXTENSIONS

    def parse(self, source: DocumentSource) -> ParsedDocument:
        root, encoding = self._load(source)
        metadata: dict[str, object] = {"encoding": encoding}
        title = root.findtext(".//title")
        if title and title.strip():
            metadata["title"] = " ".join(title.split())
        strip_page(root)  # before readability too: it scores better without navigation and hidden parts
        original = copy.deepcopy(root)
        page = Walker(AssetGate(self.limits))
        page.walk(page_content(root))
        main = main_content(original, page.blocks, AssetGate(self.limits))
        walker = page if main is None else main
        metadata["extraction"] = "full-page" if main is None else "main-content"
        return ParsedDocument(blocks=tuple(numbered(attach_captions(walker.blocks, walker.captions))),
                              metadata=with_warnings(metadata, walker.gate.warnings), assets=tuple(walker.assets))

    def _load(self, source: DocumentSource) -> tuple[HtmlElement, str]:
        return load_html(source.content, self.limits)


def load_html(content: bytes, limits: ParseLimits, what: str = "HTML page") -> tuple[HtmlElement, str]:
    """The parsed page and its encoding; InvalidDocumentError when it is empty, unparseable or
    nested deeper than the limit."""
    import lxml.html

    text, encoding = decode_text(content)
    text = _XML_DECL.sub("", text, count=1)
    if not text.strip():
        raise InvalidDocumentError(f"the {what} is empty")
    try:
        root = lxml.html.document_fromstring(text, parser=safe_parser())
    except Exception as exc:
        raise InvalidDocumentError(f"the {what} cannot be parsed ({exc})"[:300]) from exc
    depth = _max_depth(root)
    if depth > limits.max_html_depth:
        raise InvalidDocumentError(
            f"the {what} is nested {depth} elements deep, more than the limit of {limits.max_html_depth}")
    return root, encoding


def walk_html(content: bytes, limits: ParseLimits, gate: AssetGate) -> Walker:
    """All of an HTML fragment (a DOCX alt-chunk) as blocks: no main-content extraction, it is
    all content; scripts, styles and hidden parts dropped."""
    walker = Walker(gate)
    if not content.strip():
        return walker
    root, _ = load_html(content, limits, "embedded HTML")
    strip_page(root)
    body = root.find(".//body")
    walker.walk(body if body is not None else root)
    return walker


def safe_parser() -> HTMLParser:
    import lxml.html

    return lxml.html.HTMLParser(remove_comments=True, remove_pis=True, no_network=True,
                                remove_blank_text=False, huge_tree=False)


def _max_depth(root: HtmlElement) -> int:
    deepest = 0
    stack = [(root, 1)]
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in element)
    return deepest


def strip_page(root: HtmlElement) -> None:
    """Drops what is never content: scripts, styles, navigation, page headers and footers, asides,
    forms, hidden elements (an article's own header stays: it holds its title)."""
    doomed = []
    for element in root.iter():
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in ("header", "footer") and any(a.tag in ("article", "main") for a in element.iterancestors()):
            continue
        if tag in _DROP or (element.get("role") or "").lower() in _DROP_ROLES \
                or (element.get("aria-hidden") or "").lower() == "true" or element.get("hidden") is not None:
            doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()  # keeps the tail text that follows the element


def page_content(root: HtmlElement) -> HtmlElement:
    """The full-page fallback: ``<main>``, ``[role=main]`` or the largest ``<article>``, else the body."""
    for path in (".//main", ".//*[@role='main']", ".//article"):
        found = root.findall(path)
        if found:
            return max(found, key=lambda el: len(el.text_content()))
    body = root.find(".//body")
    return body if body is not None else root

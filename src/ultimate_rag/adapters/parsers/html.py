"""HTML parser on lxml: the main content only (``<main>``/``<article>`` when present; navigation,
headers, footers, asides, forms, scripts and styles dropped), headings, lists, code, tables as
Markdown pipe tables, and ``<img>`` alt text where the image sits. Images embedded as ``data:``
URIs become assets; remote images are never fetched (no network at run time).

lxml's HTML parser never expands entities or loads external resources (``no_network``); the
element walk is iterative and a document nested deeper than the limit fails with a reason
(libxml2 silently drops content below 255 levels, which would index a truncated page).
"""

from __future__ import annotations

import base64
import binascii
import re

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument

from .detect import decode_text
from .docx import table_markdown
from .limits import ParseLimits
from .pdf import figure_text

HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
_DROP = {"script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe",
         "svg", "button", "select", "object", "embed", "canvas", "dialog", "menu"}
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_LEAF = {"p": "paragraph", "pre": "code", "blockquote": "quote", "figcaption": "paragraph", "dt": "paragraph",
         "dd": "paragraph", "address": "paragraph", "caption": "paragraph"}
_CONTAINERS = {"html", "body", "main", "article", "section", "div", "figure", "span", "center", "details",
               "summary", "dl", "hgroup", "font", "a", "b", "i", "em", "strong", "small", "u", "label"}
_DATA_URI = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.*)$", re.IGNORECASE | re.DOTALL)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)


class HtmlParser:
    extensions = tuple(sorted(HTML_EXTENSIONS))
    name = "html"
    version = "1.0.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return detected_kind == "unknown" and source.extension in HTML_EXTENSIONS

    def parse(self, source: DocumentSource) -> ParsedDocument:
        import lxml.html

        text, encoding = decode_text(source.content)
        text = _XML_DECL.sub("", text, count=1)
        if not text.strip():
            raise InvalidDocumentError("the HTML page is empty")
        parser = lxml.html.HTMLParser(remove_comments=True, remove_pis=True, no_network=True,
                                      remove_blank_text=False, huge_tree=False)
        try:
            root = lxml.html.document_fromstring(text, parser=parser)
        except Exception as exc:
            raise InvalidDocumentError(f"the HTML page cannot be parsed ({exc})"[:300]) from exc
        depth = _max_depth(root)
        if depth > self.limits.max_html_depth:
            raise InvalidDocumentError(
                f"the HTML page is nested {depth} elements deep, more than the limit of {self.limits.max_html_depth}")
        metadata: dict[str, object] = {"encoding": encoding}
        title = root.findtext(".//title")
        if title and title.strip():
            metadata["title"] = " ".join(title.split())
        _strip(root)
        main = _main_content(root)
        walker = _Walker()
        walker.walk(main)
        return ParsedDocument(blocks=tuple(walker.blocks), metadata=metadata, assets=tuple(walker.assets))


def _max_depth(root) -> int:  # type: ignore[no-untyped-def]
    deepest = 0
    stack = [(root, 1)]
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in element)
    return deepest


def _strip(root) -> None:  # type: ignore[no-untyped-def]
    doomed = []
    for element in root.iter():
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in ("header", "footer") and any(a.tag in ("article", "main") for a in element.iterancestors()):
            continue  # an article's own header holds its title
        if tag in _DROP or (element.get("role") or "").lower() in _DROP_ROLES \
                or (element.get("aria-hidden") or "").lower() == "true" or element.get("hidden") is not None:
            doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()  # keeps the tail text that follows the element


def _main_content(root):  # type: ignore[no-untyped-def]
    for path in (".//main", ".//*[@role='main']", ".//article"):
        found = root.findall(path)
        if found:
            return max(found, key=lambda el: len(el.text_content()))
    body = root.find(".//body")
    return body if body is not None else root


class _Walker:
    """Iterative walk (a stack, no recursion) that turns elements into blocks in document order."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.assets: list[ParsedAsset] = []
        self._loose: list[str] = []

    def walk(self, top) -> None:  # type: ignore[no-untyped-def]
        stack: list[tuple[object, bool]] = [(top, False)]
        while stack:
            element, tail_only = stack.pop()
            if tail_only:
                self._text(getattr(element, "tail", None))
                continue
            tag = element.tag if isinstance(element.tag, str) else ""  # type: ignore[attr-defined]
            if element is not top:
                stack.append((element, True))  # the tail is read after the element itself
            if tag in _HEADINGS:
                self._heading(element, _HEADINGS[tag])
            elif tag in _LEAF:
                self._leaf(element, _LEAF[tag])
            elif tag in ("ul", "ol"):
                self._list(element)
            elif tag == "table":
                self._table(element)
            elif tag == "img":
                self._image(element)
            elif tag == "br":
                self._text("\n")
            else:
                self._text(element.text)  # type: ignore[attr-defined]
                stack.extend((child, False) for child in reversed(list(element)))  # type: ignore[call-overload]
        self._flush()

    def _text(self, text: str | None) -> None:
        if text:
            self._loose.append(text)

    def _flush(self) -> None:
        text = " ".join("".join(self._loose).split())
        self._loose = []
        if text:
            self.blocks.append(Block(kind="paragraph", text=text))

    def _add(self, kind: str, text: str, level: int = 0) -> None:
        self._flush()
        if text:
            self.blocks.append(Block(kind=kind, text=text, level=level))

    def _heading(self, element, level: int) -> None:  # type: ignore[no-untyped-def]
        self._add("heading", " ".join(element.text_content().split()), level)

    def _leaf(self, element, kind: str) -> None:  # type: ignore[no-untyped-def]
        images = element.findall(".//img")
        if kind == "code":
            self._add("code", "```\n" + element.text_content().strip("\n") + "\n```")
        else:
            self._add(kind, " ".join(element.text_content().split()))
        for image in images:
            self._image(image)

    def _list(self, element) -> None:  # type: ignore[no-untyped-def]
        ordered = element.tag == "ol"
        lines = []
        for n, item in enumerate(element.iter("li"), start=1):
            own = [item.text or ""]
            for child in item:
                if child.tag not in ("ul", "ol"):
                    own.append(child.text_content())
                own.append(child.tail or "")
            text = " ".join("".join(own).split())
            if text:
                lines.append(f"{n}. {text}" if ordered else f"- {text}")
        self._add("list", "\n".join(lines))

    def _table(self, element) -> None:  # type: ignore[no-untyped-def]
        rows = []
        for row in element.iter("tr"):
            rows.append([" ".join(cell.text_content().split()) for cell in row if cell.tag in ("td", "th")])
        self._add("table", table_markdown(rows))

    def _image(self, element) -> None:  # type: ignore[no-untyped-def]
        alt = " ".join((element.get("alt") or element.get("title") or "").split())
        src = (element.get("src") or "").strip()
        match = _DATA_URI.match(src)
        if match:
            try:
                data = base64.b64decode(match.group(2), validate=False)
            except (binascii.Error, ValueError):
                data = b""
            if data:
                key = f"img-{len(self.assets) + 1}"
                asset = ParsedAsset(locator_key=key, data=data, mime_type=match.group(1).lower(), description=alt)
                self.assets.append(asset)
                self._flush()
                self.blocks.append(Block(kind="figure", text=figure_text(asset), asset_ids=(key,)))
                return
        if alt:
            self._add("figure", f"[Image: {alt}]")

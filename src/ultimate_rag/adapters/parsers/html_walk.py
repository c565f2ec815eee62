"""Turns an lxml HTML tree into Blocks: headings with levels, paragraphs, lists, tables (rows under
their header, ``tables.py``: ``colspan``/``rowspan``, ``<thead>``/``<th>`` header rows and the
``<caption>`` resolved), code, quotes, and images (``data:`` images as assets, remote ones by their
alt text only; nothing is ever fetched). Every block carries the ``anchor`` it sits under (the last
``id`` of a block element or heading before it, so a citation can link to ``page.html#anchor``);
``numbered`` then gives each block its ordinal as ``paragraph_start``/``paragraph_end``. Shared by
the main-content path and the full-page fallback of ``html.py``, and by EPUB chapters."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from ultimate_rag.domain.models import Block, ParsedAsset, SourceLocator, figure_text

from .assets import AssetGate
from .tables import Cell, Row, table_blocks

if TYPE_CHECKING:
    from lxml.html import HtmlElement

HEADINGS = {f"h{i}": i for i in range(1, 7)}
_LEAF = {"p": "paragraph", "pre": "code", "blockquote": "quote", "figcaption": "paragraph", "dt": "paragraph",
         "dd": "paragraph", "address": "paragraph", "caption": "paragraph"}
_FILE_NAME = re.compile(r"^[^\s/]+\.(jpe?g|png|gif|webp|avif|svg|bmp|tiff?)$", re.IGNORECASE)  # "IMG_4228.jpg"
_INLINE = {"a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "kbd", "label", "mark",
           "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr"}
_SECTIONS = ("thead", "tbody", "tfoot")
_DATA_URI = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.*)$", re.IGNORECASE | re.DOTALL)


class Walker:
    """Iterative walk (a stack, no recursion) that turns elements into blocks in document order."""

    def __init__(self, gate: AssetGate) -> None:
        self.gate = gate
        self.blocks: list[Block] = []
        self.assets: list[ParsedAsset] = []
        self.tables = 0
        self.anchor: str | None = None
        self.captions: set[int] = set()  # blocks that are a <figcaption> of a figure holding a table
        self._loose: list[str] = []

    def walk(self, top: HtmlElement) -> None:
        stack: list[tuple[HtmlElement, bool]] = [(top, False)]
        while stack:
            element, tail_only = stack.pop()
            if tail_only:
                self._text(getattr(element, "tail", None))
                continue
            tag = element.tag if isinstance(element.tag, str) else ""
            if element is not top:
                stack.append((element, True))  # the tail is read after the element itself
            if element.get("id") and tag not in _INLINE:
                self._flush()  # text before this element is not under its anchor
                self.anchor = " ".join(str(element.get("id")).split())[:200] or self.anchor
            if tag in HEADINGS:
                self._heading(element, HEADINGS[tag])
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
                self._text(element.text)
                stack.extend((child, False) for child in reversed(list(element)))
        self._flush()

    def _text(self, text: str | None) -> None:
        if text:
            self._loose.append(text)

    def _flush(self) -> None:
        text = " ".join("".join(self._loose).split())
        self._loose = []
        if text:
            self.blocks.append(Block(kind="paragraph", text=text, locator=self._here()))

    def _here(self) -> SourceLocator:
        return SourceLocator(anchor=self.anchor)

    def _add(self, kind: str, text: str, level: int = 0) -> None:
        self._flush()
        if text:
            self.blocks.append(Block(kind=kind, text=text, level=level, locator=self._here()))

    def _heading(self, element: HtmlElement, level: int) -> None:
        self._add("heading", " ".join(element.text_content().split()), level)

    def _leaf(self, element: HtmlElement, kind: str) -> None:
        images = element.findall(".//img")
        figure = element.getparent()
        if element.tag == "figcaption" and figure is not None and figure.find(".//table") is not None \
                and element.text_content().strip():
            self._flush()
            self.captions.add(len(self.blocks))  # the caption of the figure's table (table_captions)
        if kind == "code":
            self._add("code", "```\n" + element.text_content().strip("\n") + "\n```")
        else:
            self._add(kind, " ".join(element.text_content().split()))
        for image in images:
            self._image(image)

    def _list(self, element: HtmlElement) -> None:
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

    def _table(self, element: HtmlElement) -> None:
        """The table's own rows (not those of tables nested in its cells, whose text stays in
        their cell); its ``<caption>`` the table's caption."""
        self._flush()
        caption = " ".join(" ".join(c.text_content().split()) for c in element.findall("caption"))
        rows = []
        for tr in _own_rows(element):
            cells = [Cell(" ".join(cell.text_content().split()), colspan=_span(cell.get("colspan")),
                          rowspan=_span(cell.get("rowspan")), header=cell.tag == "th")
                     for cell in tr if cell.tag in ("td", "th")]
            section = tr.getparent()
            rows.append(Row(cells, header=section is not None and section.tag == "thead"))
        blocks = table_blocks(rows, table=self.tables + 1, locator=self._here(), caption=caption)
        if any(b.kind == "table" for b in blocks):
            self.tables += 1
        self.blocks.extend(blocks)

    def _image(self, element: HtmlElement) -> None:
        alt = " ".join((element.get("alt") or element.get("title") or "").split())
        alt = "" if _FILE_NAME.match(alt) else alt  # a file name says nothing about the image
        src = (element.get("src") or "").strip()
        match = _DATA_URI.match(src)
        if match:
            key = f"img-{len(self.assets) + 1}"
            what = f"a data: image ({match.group(1).lower()})"
            data = b""
            # the decoded size is known from the length: an oversized image is never decoded
            if not self.gate.too_large(len(match.group(2)) * 3 // 4, what):
                try:
                    data = base64.b64decode(match.group(2), validate=False)
                except (binascii.Error, ValueError):
                    data = b""
            asset = self.gate.admit(ParsedAsset(locator_key=key, data=data, mime_type="application/octet-stream",
                                                description=alt), what) if data else None
            if asset is not None:
                self.assets.append(asset)
                self._flush()
                self.blocks.append(Block(kind="figure", text=figure_text(asset), asset_ids=(key,),
                                         locator=self._here()))
                return
        if alt:
            self._add("figure", f"[Image: {alt}]")


def _own_rows(table: HtmlElement) -> list[HtmlElement]:
    """The rows of a table itself: its ``tr`` children and those of its ``thead``/``tbody``/``tfoot``."""
    rows = []
    for child in table:
        if child.tag == "tr":
            rows.append(child)
        elif child.tag in _SECTIONS:
            rows.extend(row for row in child if row.tag == "tr")
    return rows


def _span(value: str | None) -> int:
    """A ``colspan``/``rowspan`` as browsers read it: digits at the start, 1 when there are none
    (``rowspan="0"``, to the end of the section, is read as 1)."""
    digits = re.match(r"\s*(\d+)", value or "")
    return max(1, int(digits.group(1)[:6])) if digits else 1


def numbered(blocks: list[Block]) -> list[Block]:
    """Each block with its ordinal (1-based) as ``paragraph_start``/``paragraph_end``, rows too."""
    out = []
    for n, block in enumerate(blocks, start=1):
        rows = tuple(replace(r, paragraph_start=n, paragraph_end=n) for r in block.rows)
        out.append(replace(block, locator=replace(block.locator, paragraph_start=n, paragraph_end=n), rows=rows))
    return out

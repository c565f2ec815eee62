"""DOCX parser on python-docx: the body read in order (paragraphs, tables, block-level content
controls and HTML alt-chunks), heading styles as headings, tables as rows under their header
(``tables.py``: merged cells and multi-row headers resolved), and embedded images as assets with
their alt text or caption as the description.

Every block cites where it is: ``paragraph_start``/``paragraph_end`` count the body's ``w:p``
elements (and alt-chunks) in document order, 1-based, table cells included; ``anchor`` is the
bookmark of the heading above it (Word's table of contents links to those), when it has one.

Before python-docx sees the file, the package is checked (``packages.py``: zip bombs, entity
declarations, oversized binary parts emptied). python-docx itself parses with
``resolve_entities=False``; images go through the asset gate (``assets.py``).
"""

from __future__ import annotations

import io
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import (
    Block,
    DocumentSource,
    ParsedAsset,
    ParsedDocument,
    SourceLocator,
    figure_text,
)

from .assets import AssetGate, with_warnings
from .docx_notes import Notes, header_footer_blocks
from .docx_xml import (
    ALT_CHUNK,
    RID,
    TBL,
    TR,
    P,
    W,
    block_elements,
    grid_skip,
    paragraph_images,
    row_cells,
    vertical_merge,
)
from .limits import ParseLimits
from .packages import check_archive, transitional, without_oversized_parts
from .pdf import CAPTION
from .properties import office_properties
from .table_captions import attach_captions
from .tables import Cell, Row, table_blocks, table_markdown

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument
    from docx.text.paragraph import Paragraph

__all__ = ["DocxParser", "table_markdown"]  # table_markdown: kept importable from here
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_BOOKMARK = f"{{{W}}}bookmarkStart"
_MAX_TABLE_DEPTH = 16  # tables nested deeper are indexed as flattened text
_HTML_CHUNKS = ("text/html", "application/xhtml+xml")


class DocxParser:
    extensions = (".docx",)
    name = "docx"
    version = "1.3.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".docx" and detected_kind in (f"binary:{DOCX_MIME}", "binary:application/zip")

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits)
        gate = AssetGate(self.limits)
        content = transitional(without_oversized_parts(source.content, gate), self.limits)
        import docx  # imported here: python-docx pulls in lxml, which only this parser needs

        try:
            document = docx.Document(io.BytesIO(content))
        except Exception as exc:
            raise InvalidDocumentError(f"the file is not a readable DOCX document ({exc})"[:300]) from exc
        notes = Notes.load(document)
        title = document.core_properties.title or ""
        body = _Body(document, notes, gate, self.limits)
        body.items(document.element.body, depth=0)
        headers, footers = header_footer_blocks(document, title)
        blocks = headers + _merge_lists(attach_captions(body.blocks, body.styled)) + notes.leftovers() + footers
        metadata: dict[str, object] = {"properties": office_properties(document.core_properties)}
        if title:
            metadata["title"] = title
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, gate.warnings),
                              assets=tuple(body.assets.values()))


class _Body:
    """The body (or a layout table's cell) read in order: paragraphs, headings, lists, images with
    their captions, tables — with the tables nested in their cells after them —, alt-chunks, and
    the notes and comments each paragraph references; every block with its locator."""

    def __init__(self, document: DocxDocument, notes: Notes, gate: AssetGate, limits: ParseLimits) -> None:
        self.document = document
        self.notes = notes
        self.gate = gate
        self.limits = limits
        self.refused: set[str] = set()
        self.blocks: list[Block] = []
        self.assets: dict[str, ParsedAsset] = {}
        self.pending: list[int] = []  # figure blocks still without a description, waiting for a caption
        # every paragraph (and alt-chunk) of the body, numbered in document order: the locator
        self.numbers = {el: n for n, el in enumerate(document.element.body.iter(P, ALT_CHUNK), start=1)}
        self.anchor: str | None = None  # the bookmark of the heading above
        self.tables = 0
        self.styled: set[int] = set()  # blocks of paragraphs styled as captions (a table's, see table_captions)

    def items(self, container: Any, depth: int) -> None:
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        for element in block_elements(container):
            if element.tag == P:
                self.paragraph(Paragraph(element, self.document._body))
            elif element.tag == TBL:
                self.table(Table(element, self.document._body), depth)
            else:
                self.alt_chunk(element)

    def here(self, element: Any) -> SourceLocator:
        number = self.numbers.get(element)
        return SourceLocator(paragraph_start=number, paragraph_end=number, anchor=self.anchor)

    def paragraph(self, item: Paragraph) -> None:
        text, refs = self.notes.paragraph_text(item)
        text = text.strip()
        style = (item.style.name if item.style is not None else "") or ""
        self.images(item)
        if text:
            self.text(text, style, item._element)
        self.blocks.extend(replace(b, locator=self.here(item._element)) for b in self.notes.blocks_for(refs))

    def images(self, paragraph: Paragraph) -> None:
        here = self.here(paragraph._element)
        for key, found in paragraph_images(self.document, paragraph, len(self.assets)):
            if key in self.assets or key in self.refused:
                continue
            # an emptied part (over the size limit, already warned about) is refused unread
            asset = self.gate.admit(found, f"the image {key.removeprefix('part-')}") if found.data else None
            if asset is None:
                self.refused.add(key)
                if found.description:
                    self.blocks.append(Block(kind="figure", text=f"[Image: {found.description}]", locator=here))
                continue
            self.assets[key] = asset
            self.blocks.append(Block(kind="figure", text=figure_text(asset), locator=here, asset_ids=(key,)))
            if not asset.description:
                self.pending.append(len(self.blocks) - 1)

    def text(self, text: str, style: str, element: Any) -> None:
        if self.pending and (style.lower() == "caption" or CAPTION.match(text)):
            for index in self.pending:
                key = self.blocks[index].asset_ids[0]
                self.assets[key] = replace(self.assets[key], description=text)
                self.blocks[index] = replace(self.blocks[index], text=figure_text(self.assets[key]))
        self.pending = []
        match = _HEADING_STYLE.match(style)
        if match or style.lower() == "title":
            self.anchor = next((name for b in element.iter(_BOOKMARK)
                                if (name := b.get(f"{{{W}}}name")) and name != "_GoBack"), None)
            level = int(match.group(1)) if match else 1
            self.blocks.append(Block(kind="heading", text=" ".join(text.split()), level=max(1, min(level, 6)),
                                     locator=self.here(element)))
        elif style.lower().startswith("list"):
            self.blocks.append(Block(kind="list", text=f"- {text}", locator=self.here(element)))
        else:
            if "caption" in style.lower():
                self.styled.add(len(self.blocks))
            self.blocks.append(Block(kind="paragraph", text=text, locator=self.here(element)))

    def table(self, table: Any, depth: int) -> None:
        """Rows under their header (``tables.py``); a table nested in a cell is marked there
        (``[nested table]``) and follows as its own table. A one-cell table is a layout frame: its
        content is read as body."""
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        trs = list(table._tbl.iterchildren(TR))
        tcs = [list(row_cells(tr)) for tr in trs]
        filled = [tc for row in tcs for tc in row if vertical_merge(tc) != "continue"]
        if len(filled) == 1 and depth < _MAX_TABLE_DEPTH:
            self.items(filled[0], depth + 1)
            return
        nested, paragraphs, refs, rows = [], [], [], []
        for number, (tr, row) in enumerate(zip(trs, tcs, strict=True), start=1):
            cells = []
            for tc in row:
                parts = []
                for element in block_elements(tc):
                    if element.tag == P:
                        paragraph = Paragraph(element, table)
                        text, found = self.notes.paragraph_text(paragraph)
                        parts.append(text)
                        refs.extend(found)
                        paragraphs.append(paragraph)
                    elif element.tag != TBL:
                        parts.append("[embedded content]")
                    elif depth >= _MAX_TABLE_DEPTH:  # hostile nesting: the text, flattened
                        parts.append("".join(element.itertext()))
                    else:
                        nested.append(element)
                        parts.append("[nested table]")
                span = tc.grid_span if hasattr(tc, "grid_span") else 1
                cells.append(Cell(" ".join(" ".join(parts).split()), colspan=span,
                                  continued=vertical_merge(tc) == "continue"))
            before = grid_skip(tr, "gridBefore")
            numbers = [self.numbers[p] for p in tr.iter(P) if p in self.numbers]
            where = SourceLocator(paragraph_start=min(numbers, default=None), paragraph_end=max(numbers, default=None),
                                  anchor=self.anchor)
            rows.append(Row(([Cell("", colspan=before)] if before else []) + cells, number=number,
                            header=tr.find(f"{{{W}}}trPr/{{{W}}}tblHeader") is not None, locator=where))
        self.tables += 1
        blocks = table_blocks(rows, table=self.tables, locator=SourceLocator(anchor=self.anchor))
        self.blocks.extend(blocks)
        waiting = self.pending  # images in cells take no caption from the paragraphs after the table
        for paragraph in paragraphs:
            self.images(paragraph)
        self.pending = waiting
        where = replace(blocks[-1].locator, table=None, row_start=None, row_end=None) if blocks else self.here(None)
        self.blocks.extend(replace(b, locator=where) for b in self.notes.blocks_for(refs))
        for inner in nested:
            self.table(Table(inner, table), depth + 1)

    def alt_chunk(self, element: Any) -> None:
        """An alt-chunk: a part in another format that Word imports where it stands (HTML, text)."""
        part = self.document.part.related_parts.get(element.get(RID) or "")
        if part is None:
            return
        kind = str(getattr(part, "content_type", "")).split(";")[0].strip().lower()
        blob = bytes(getattr(part, "blob", b"") or b"")
        here = self.here(element)
        if kind in _HTML_CHUNKS:
            from .html import walk_html

            walker = walk_html(blob, self.limits, self.gate)
            prefix = f"part-{str(part.partname).lstrip('/')}/"  # its images' keys, unique in the document
            for asset in walker.assets:
                self.assets[prefix + asset.locator_key] = replace(asset, locator_key=prefix + asset.locator_key)
            self.blocks.extend(_moved(block, here, self.tables, prefix) for block in walker.blocks)
            self.tables += walker.tables
        elif kind == "text/plain":
            from .detect import decode_text
            from .text import paragraph_blocks

            self.blocks.extend(replace(b, locator=here) for b in paragraph_blocks(decode_text(blob)[0]))
        else:
            self.gate.warn(f"an embedded {kind or 'part'} (alt-chunk) was not read: only HTML and text are")


def _moved(block: Block, here: SourceLocator, tables: int, prefix: str) -> Block:
    """A block of an alt-chunk where the alt-chunk stands: its paragraph, the table numbered after
    the document's tables before it, its images' keys under the part's name."""
    def at(loc: SourceLocator) -> SourceLocator:
        return replace(here, table=loc.table + tables if loc.table else None, row_start=loc.row_start,
                       row_end=loc.row_end)

    return replace(block, locator=at(block.locator), rows=tuple(at(r) for r in block.rows),
                   asset_ids=tuple(prefix + k for k in block.asset_ids))


def _merge_lists(blocks: list[Block]) -> list[Block]:
    """Consecutive list paragraphs become one list block (citing all their paragraphs)."""
    out: list[Block] = []
    for block in blocks:
        if block.kind == "list" and out and out[-1].kind == "list":
            first = out[-1].locator
            out[-1] = Block(kind="list", text=out[-1].text + "\n" + block.text,
                            locator=replace(first, paragraph_end=block.locator.paragraph_end or first.paragraph_end))
        else:
            out.append(block)
    return out

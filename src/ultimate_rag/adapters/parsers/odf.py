"""OpenDocument (ODT text, ODS spreadsheets, ODP presentations) read from the package's
``content.xml`` with lxml directly (no odfpy: nothing it adds is needed, and the XML is small).

* ODT: headings (``text:h`` with their outline level), paragraphs, lists, tables (rows under
  their header, ``tables.py``: ``table:table-header-rows`` and merged cells resolved), sections,
  images (``Pictures/…``, through the gate) in document order; every block cites the paragraphs
  it holds (``text:p``/``text:h`` in document order, 1-based).
* ODS: every sheet a section with one table, rows located like XLSX (``sheets.py``); repeated
  rows and cells (``number-rows-repeated``, a classic way to claim a billion cells) are counted
  against ``max_cells`` before they are expanded, and trailing empty ones are never expanded.
* ODP: every slide a page (its number the locator), its title frame a heading, text boxes,
  tables, images and the speaker notes.

The zip is checked first (``packages.check_archive``: entries, unpacked size, entity declarations
refused); a package whose manifest lists encrypted parts is refused as encrypted.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator, figure_text

from . import progress
from .assets import AssetGate, with_warnings
from .limits import ParseLimits
from .packages import check_archive
from .properties import odf_properties
from .sheets import CellCounter, check_sheet_count, sheet_blocks
from .slides import NOTES_PREFIX
from .table_captions import attach_captions
from .tables import Cell, Row, table_blocks
from .zipxml import parse_xml, read_part

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "xlink": "http://www.w3.org/1999/xlink",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
}
ODF_KINDS = {".odt": "binary:application/vnd.oasis.opendocument.text",
             ".ods": "binary:application/vnd.oasis.opendocument.spreadsheet",
             ".odp": "binary:application/vnd.oasis.opendocument.presentation"}
_MAX_DEPTH = 64  # sections, lists and frames nested deeper are read as plain text


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


class OdfParser:
    extensions = (".odp", ".ods", ".odt")
    name = "odf"
    version = "1.2.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return ODF_KINDS.get(source.extension) == detected_kind

    def parse(self, source: DocumentSource) -> ParsedDocument:
        what = source.extension[1:].upper()
        check_archive(source.content, self.limits, what)
        with zipfile.ZipFile(io.BytesIO(source.content)) as archive:
            manifest = read_part(archive, "META-INF/manifest.xml", self.limits, what) or b""
            if b"encryption-data" in manifest:  # ODF 1.2 §3.8: the encrypted parts say so in the manifest
                raise InvalidDocumentError(f"the {what} document is encrypted with a password; "
                                           "remove the password and upload it again")
            data = read_part(archive, "content.xml", self.limits, what)
            if data is None:
                raise InvalidDocumentError(f"the {what} package has no content.xml")
            body = parse_xml(data, "content.xml", what).find(f"{_q('office:body')}")
            if body is None:
                raise InvalidDocumentError(f"the {what} document has no body")
            reader = _Reader(archive, self.limits, what)
            meta = read_part(archive, "meta.xml", self.limits, what)
            if meta:
                reader.metadata["properties"] = odf_properties(parse_xml(meta, "meta.xml", what))
            if (sheet := body.find(_q("office:spreadsheet"))) is not None:
                reader.spreadsheet(sheet)
            elif (slides := body.find(_q("office:presentation"))) is not None:
                reader.presentation(slides)
            else:
                text = body.find(_q("office:text"))
                reader.number(text if text is not None else body)
                reader.flow(text if text is not None else body, None, 0)
        blocks = attach_captions(reader.blocks, reader.styled)
        return ParsedDocument(blocks=tuple(blocks), assets=tuple(reader.assets),
                              metadata=with_warnings(reader.metadata, reader.gate.warnings))


class _Reader:
    def __init__(self, archive: zipfile.ZipFile, limits: ParseLimits, what: str) -> None:
        self.archive = archive
        self.limits = limits
        self.what = what
        self.gate = AssetGate(limits)
        self.blocks: list[Block] = []
        self.assets: list[ParsedAsset] = []
        self.metadata: dict[str, Any] = {}
        self.tables = 0
        self.styled: set[int] = set()  # blocks of paragraphs styled or numbered as captions
        self.numbers: dict[Any, int] = {}  # text paragraphs and headings in document order: the locator

    def number(self, body: Any) -> None:
        self.numbers = {el: n for n, el in enumerate(body.iter(_q("text:p"), _q("text:h")), start=1)}

    def _here(self, element: Any, page: int | None) -> SourceLocator:
        """The page (a slide) and the paragraphs an element holds."""
        found = [self.numbers[e] for e in element.iter(_q("text:p"), _q("text:h")) if e in self.numbers]
        return SourceLocator(page=page, paragraph_start=min(found, default=None),
                             paragraph_end=max(found, default=None))

    def flow(self, element: Any, page: int | None, depth: int) -> None:
        """Text content in order: headings, paragraphs, lists, tables, images, sections."""
        for child in element:
            tag = child.tag
            here = self._here(child, page)
            if tag == _q("text:h"):
                level = int(child.get(_q("text:outline-level")) or 1)
                self._add("heading", _text(child), here, min(max(level, 1), 6))
                self._frames(child, page, depth)
            elif tag == _q("text:p"):
                text = _text(child)
                if text and _caption_styled(child):
                    self.styled.add(len(self.blocks))
                self._add("paragraph", text, here)
                self._frames(child, page, depth)
            elif tag == _q("text:list"):
                items = [_text(p) for p in child.iter(_q("text:p"), _q("text:h"))]
                self._add("list", "\n".join(f"- {t}" for t in items if t), here)
            elif tag == _q("table:table"):
                rows = _numbered_rows(child, CellCounter(self.limits), lambda row: self._here(row, page))
                found = table_blocks(rows, table=self.tables + 1, locator=SourceLocator(page=page))
                self.tables += any(b.kind == "table" for b in found)
                self.blocks.extend(found)
            elif tag == _q("draw:frame") and depth < _MAX_DEPTH:
                self._frame(child, page, depth + 1)
            elif depth < _MAX_DEPTH and tag in (_q("text:section"), _q("draw:text-box"), _q("draw:g"),
                                                 _q("draw:custom-shape"), _q("text:index-body")):
                self.flow(child, page, depth + 1)

    def spreadsheet(self, element: Any) -> None:
        sheets = element.findall(_q("table:table"))
        check_sheet_count(len(sheets), self.limits)
        counter = CellCounter(self.limits)
        for index, sheet in enumerate(sheets):
            progress.report(index, len(sheets))
            rows = _numbered_rows(sheet, counter, lambda _: SourceLocator())
            self.blocks.extend(sheet_blocks(sheet.get(_q("table:name")) or f"Sheet {index + 1}", rows))
        self.metadata.update(sheets=len(sheets), cells=counter.cells)

    def presentation(self, element: Any) -> None:
        pages = element.findall(_q("draw:page"))
        if len(pages) > self.limits.max_pages:
            raise InvalidDocumentError(f"the presentation has {len(pages)} slides, more than the limit of "
                                       f"{self.limits.max_pages}")
        for number, page in enumerate(pages, start=1):
            progress.report(number - 1, len(pages))
            titles = [f for f in page.iter(_q("draw:frame")) if f.get(_q("presentation:class")) == "title"]
            title = _text(titles[0]) if titles else ""
            here = SourceLocator(page=number)
            self.blocks.append(Block(kind="heading", text=title or f"Slide {number}", locator=here, level=1))
            start = len(self.blocks)
            for child in page:
                if child.tag == _q("presentation:notes"):
                    continue
                if child.tag == _q("draw:frame") and child in titles:
                    continue
                self.flow([child], number, 1)
            shown = self.blocks[start:]
            if title and len(shown) == 1 and shown[0].kind == "table" and not shown[0].caption:
                self.blocks[start] = replace(shown[0], caption=title)  # the slide holds just the table
            notes = page.find(_q("presentation:notes"))
            if notes is not None:
                texts = [_text(p) for p in notes.iter(_q("text:p"))]
                text = "\n".join(t for t in texts if t)
                if text:
                    self.blocks.append(Block(kind="paragraph", text=f"{NOTES_PREFIX} {text}", locator=here))
        self.metadata["page_count"] = len(pages)

    def _frame(self, frame: Any, page: int | None, depth: int) -> None:
        for child in frame:
            if child.tag == _q("draw:image"):
                self._image(child, frame, page)
            else:
                self.flow([child], page, depth)

    def _frames(self, paragraph: Any, page: int | None, depth: int) -> None:
        """Images and text boxes anchored in a paragraph, after it."""
        if depth >= _MAX_DEPTH:
            return
        for frame in paragraph.findall(f".//{_q('draw:frame')}"):
            if any(a.tag == _q("draw:frame") for a in frame.iterancestors() if a is not paragraph
                   and paragraph in a.iterancestors()):
                continue  # a frame inside another frame's text box is read with that box
            self._frame(frame, page, depth + 1)

    def _image(self, image: Any, frame: Any, page: int | None) -> None:
        href = (image.get(_q("xlink:href")) or "").lstrip("./")
        if not href or "://" in href:
            return
        try:
            entry = self.archive.getinfo(href)
        except KeyError:
            return
        what = f"the image {href}"
        if self.gate.too_large(entry.file_size, what):
            return
        data = read_part(self.archive, href, self.limits, self.what) or b""
        alt = " ".join("".join(t for d in frame.findall(_q("svg:desc")) for t in d.itertext()).split())
        key = f"part-{href}"
        asset = self.gate.admit(ParsedAsset(locator_key=key, data=data, mime_type="application/octet-stream",
                                            page=page, description=alt), what)
        if asset is not None:
            self.assets.append(asset)
            self.blocks.append(Block(kind="figure", text=figure_text(asset), locator=SourceLocator(page=page),
                                     asset_ids=(key,)))

    def _add(self, kind: str, text: str, locator: SourceLocator, level: int = 0) -> None:
        if text:
            self.blocks.append(Block(kind=kind, text=text, locator=locator, level=level))


def _text(element: Any) -> str:
    """The text of a paragraph: spaces (``text:s``), tabs and line breaks written out; notes'
    citations and the frames inside (images, text boxes read on their own) left out."""
    out: list[str] = []
    skip = {_q("text:note-citation"), _q("draw:frame"), _q("office:annotation")}

    def walk(node: Any) -> None:
        if node.text:
            out.append(node.text)
        for child in node:
            if child.tag in skip:
                pass
            elif child.tag == _q("text:s"):
                out.append(" " * min(int(child.get(_q("text:c")) or 1), 100))
            elif child.tag in (_q("text:tab"), _q("text:line-break")):
                out.append(" ")
            else:
                walk(child)
            if child.tail:
                out.append(child.tail)

    walk(element)
    return " ".join("".join(out).split())


def _cells(row: Any, counter: CellCounter) -> list[Cell]:
    """A row's cells with ``number-columns-repeated`` expanded (trailing empty cells never) and
    merged cells by their origin (``number-columns-spanned``/``number-rows-spanned``; the covered
    cells they hide are left out: the span fills their places)."""
    cells: list[Cell] = []
    pending_empty = 0
    for cell in row:
        if cell.tag != _q("table:table-cell"):  # covered cells (and anything else) hold no place of their own
            continue
        repeat = max(1, int(cell.get(_q("table:number-columns-repeated")) or 1))
        text = " ".join(t for t in (_text(p) for p in cell.iter(_q("text:p"))) if t)
        colspan = _count(cell.get(_q("table:number-columns-spanned")))
        rowspan = _count(cell.get(_q("table:number-rows-spanned")))
        if not text and colspan == 1 and rowspan == 1:
            pending_empty += repeat
            continue
        counter.add(pending_empty + repeat)  # checked before anything is expanded
        cells.extend([Cell("")] * pending_empty + [Cell(text, colspan=colspan, rowspan=rowspan)] * repeat)
        pending_empty = 0
    return cells


def _count(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 1_000_000))
    except ValueError:
        return 1


def _own_rows(table: Any, header: bool = False) -> Iterator[tuple[Any, bool]]:
    """The table's rows (not those of tables nested in its cells), with whether each is a header
    row (``table:table-header-rows``)."""
    for child in table:
        if child.tag == _q("table:table-row"):
            yield child, header
        elif child.tag in (_q("table:table-header-rows"), _q("table:table-rows"), _q("table:table-row-group")):
            yield from _own_rows(child, header or child.tag == _q("table:table-header-rows"))


def _caption_styled(paragraph: Any) -> bool:
    """A caption paragraph: LibreOffice's ``Table``/``Caption`` styles or a numbered ``Table`` sequence."""
    style = (paragraph.get(_q("text:style-name")) or "").lower()
    return style in ("table", "caption", "table_20_caption") or any(
        (seq.get(_q("text:name")) or "").lower() == "table" for seq in paragraph.iter(_q("text:sequence")))


def _numbered_rows(table: Any, counter: CellCounter, locate: Callable[[Any], SourceLocator]) -> list[Row]:
    """The rows numbered as the table (a sheet) numbers them, ``number-rows-repeated`` expanded
    (counted first; empty repeats are never expanded)."""
    rows: list[Row] = []
    number = 0
    for element, header in _own_rows(table):
        repeat = max(1, int(element.get(_q("table:number-rows-repeated")) or 1))
        cells = _cells(element, counter)
        if cells:
            counter.add(sum(1 for c in cells if c.text) * (repeat - 1))
            where = locate(element)
            rows.extend(Row(cells, number=number + k + 1, header=header, locator=where) for k in range(repeat))
        number += repeat
    return rows

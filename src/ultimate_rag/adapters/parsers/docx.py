"""DOCX parser on python-docx: the body read in order (``iter_inner_content``), heading styles as
headings, tables rendered as Markdown pipe tables (kept whole by the chunker where they fit), and
embedded images as assets with their alt text or caption as the description.

Before python-docx sees the file, the zip is checked: entry count and total uncompressed size are
capped (a zip bomb fails here, before anything is inflated), and an XML part that declares a DTD
(the only way to an entity expansion) is refused. python-docx itself parses with
``resolve_entities=False``. A binary part (an image, an embedded object) larger than the
per-image limit is emptied before python-docx loads the package (it reads every part whole), so
it is never inflated into memory; images go through the asset gate (``assets.py``).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, figure_text

from .assets import AssetGate, with_warnings
from .docx_notes import Notes, header_footer_blocks
from .limits import ParseLimits
from .pdf import CAPTION

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument
    from docx.table import Table
    from docx.text.paragraph import Paragraph

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_NS = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "v": "urn:schemas-microsoft-com:vml",
}
_EMBED = f"{{{_NS['r']}}}embed"
_RID = f"{{{_NS['r']}}}id"
_MAX_TABLE_DEPTH = 16  # tables nested deeper are indexed as flattened text
# parts checked for DTDs: OOXML/ODF XML and relationships, EPUB packages, navigation and XHTML
XML_SUFFIXES = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg")


class DocxParser:
    extensions = (".docx",)
    name = "docx"
    version = "1.1.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".docx" and detected_kind in (f"binary:{DOCX_MIME}", "binary:application/zip")

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits)
        gate = AssetGate(self.limits)
        content = without_oversized_parts(source.content, gate)
        import docx  # imported here: python-docx pulls in lxml, which only this parser needs

        try:
            document = docx.Document(io.BytesIO(content))
        except Exception as exc:
            raise InvalidDocumentError(f"the file is not a readable DOCX document ({exc})"[:300]) from exc
        notes = Notes.load(document)
        title = document.core_properties.title or ""
        body = _Body(document, notes, gate)
        body.items(document.iter_inner_content(), depth=0)
        headers, footers = header_footer_blocks(document, title)
        blocks = headers + _merge_lists(body.blocks) + notes.leftovers() + footers
        metadata: dict[str, object] = {}
        if title:
            metadata["title"] = title
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, gate.warnings),
                              assets=tuple(body.assets.values()))


class _Body:
    """The body (or a layout table's cell) read in order: paragraphs, headings, lists, images with
    their captions, tables — with the tables nested in their cells after them — and the notes and
    comments each paragraph references."""

    def __init__(self, document: DocxDocument, notes: Notes, gate: AssetGate) -> None:
        self.document = document
        self.notes = notes
        self.gate = gate
        self.refused: set[str] = set()
        self.blocks: list[Block] = []
        self.assets: dict[str, ParsedAsset] = {}
        self.pending: list[int] = []  # figure blocks still without a description, waiting for a caption

    def items(self, items: Iterable[Paragraph | Table], depth: int) -> None:
        for item in items:
            if item.__class__.__name__ == "Table":  # python-docx is imported only when a file is parsed
                self.table(cast("Table", item), depth)
            else:
                self.paragraph(cast("Paragraph", item))

    def paragraph(self, item: Paragraph) -> None:
        text, refs = self.notes.paragraph_text(item)
        text = text.strip()
        style = (item.style.name if item.style is not None else "") or ""
        self.images(item)
        if text:
            self.text(text, style)
        self.blocks.extend(self.notes.blocks_for(refs))

    def images(self, paragraph: Paragraph) -> None:
        for key, found in _paragraph_images(self.document, paragraph, len(self.assets)):
            if key in self.assets or key in self.refused:
                continue
            # an emptied part (over the size limit, already warned about) is refused unread
            asset = self.gate.admit(found, f"the image {key.removeprefix('part-')}") if found.data else None
            if asset is None:
                self.refused.add(key)
                if found.description:
                    self.blocks.append(Block(kind="figure", text=f"[Image: {found.description}]"))
                continue
            self.assets[key] = asset
            self.blocks.append(Block(kind="figure", text=figure_text(asset), asset_ids=(key,)))
            if not asset.description:
                self.pending.append(len(self.blocks) - 1)

    def text(self, text: str, style: str) -> None:
        if self.pending and (style.lower() == "caption" or CAPTION.match(text)):
            for index in self.pending:
                key = self.blocks[index].asset_ids[0]
                asset = self.assets[key]
                self.assets[key] = replace(asset, description=text)
                self.blocks[index] = Block(kind="figure", text=figure_text(self.assets[key]), asset_ids=(key,))
        self.pending = []
        match = _HEADING_STYLE.match(style)
        if match or style.lower() == "title":
            level = int(match.group(1)) if match else 1
            self.blocks.append(Block(kind="heading", text=" ".join(text.split()), level=max(1, min(level, 6))))
        elif style.lower().startswith("list"):
            self.blocks.append(Block(kind="list", text=f"- {text}"))
        else:
            self.blocks.append(Block(kind="paragraph", text=text))

    def table(self, table: Table, depth: int) -> None:
        """A Markdown table; a table nested in a cell is marked there (``[nested table]``) and
        follows as its own table. A one-cell table is a layout frame: its content is read as body."""
        grid = [list(row.cells) for row in table.rows]
        cells: dict[Any, Any] = {}  # merged cells repeat in python-docx's rows: each cell's content is read once
        for cell in (c for row in grid for c in row):
            cells.setdefault(cell._tc, cell)
        if len(cells) == 1 and depth < _MAX_TABLE_DEPTH:
            self.items(next(iter(cells.values())).iter_inner_content(), depth + 1)
            return
        texts: dict[Any, str] = {}
        nested, paragraphs, refs = [], [], []
        for tc, cell in cells.items():
            parts = []
            for inner in cell.iter_inner_content():
                if inner.__class__.__name__ != "Table":
                    text, found = self.notes.paragraph_text(inner)
                    parts.append(text)
                    refs.extend(found)
                    paragraphs.append(inner)
                elif depth >= _MAX_TABLE_DEPTH:  # hostile nesting: the text, flattened
                    parts.append("".join(inner._tbl.itertext()))
                else:
                    nested.append(inner)
                    parts.append("[nested table]")
            texts[tc] = " ".join(" ".join(parts).split())
        text = table_markdown([[texts[cell._tc] for cell in row] for row in grid])
        if text:
            self.blocks.append(Block(kind="table", text=text))
        waiting = self.pending  # images in cells take no caption from the paragraphs after the table
        for paragraph in paragraphs:
            self.images(paragraph)
        self.pending = waiting
        self.blocks.extend(self.notes.blocks_for(refs))
        for inner in nested:
            self.table(inner, depth + 1)


def check_archive(content: bytes, limits: ParseLimits, what: str = "DOCX") -> None:
    """Refuse zip bombs and DTDs before any part is parsed (DOCX and every other zip-based format:
    ``what`` names it in the reasons). Declared sizes are what zipfile inflates at most (it stops
    at ``file_size``), so capping their sum caps the real work."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InvalidDocumentError(f"the file is not a readable {what} document (bad zip: {exc})") from exc
    with archive:
        entries = archive.infolist()
        if len(entries) > limits.max_archive_entries:
            raise InvalidDocumentError(
                f"the {what} archive has {len(entries)} entries, more than the limit of {limits.max_archive_entries}")
        total = sum(max(0, e.file_size) for e in entries)
        if total > limits.max_archive_bytes:
            raise InvalidDocumentError(
                f"the {what} archive unpacks to {total} bytes, more than the limit of {limits.max_archive_bytes} "
                "(a zip bomb?)")
        for entry in entries:
            if not entry.filename.lower().endswith(XML_SUFFIXES):
                continue
            try:
                with archive.open(entry) as part:
                    head = part.read(4096)
                    data = head + part.read()
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError) as exc:
                raise InvalidDocumentError(f"the {what} archive is damaged ({entry.filename}: {exc})") from exc
            if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
                raise InvalidDocumentError(
                    f"the {what} part {entry.filename} declares a DTD or XML entities, which are refused "
                    "(XML entity expansion)")


def without_oversized_parts(content: bytes, gate: AssetGate) -> bytes:
    """The package with every binary part over the per-image limit emptied (judged by its declared
    size, before anything is inflated); the original bytes when there is none."""
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        entries = archive.infolist()
        oversized = {e.filename for e in entries if not _is_xml(e.filename)
                     and gate.too_large(e.file_size, f"the part {e.filename}")}
        if not oversized:
            return content
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as rebuilt:
            for entry in entries:
                data = b"" if entry.filename in oversized else _read_capped(archive, entry, gate.limits)
                rebuilt.writestr(entry.filename, data)
    return out.getvalue()


def _read_capped(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, limits: ParseLimits) -> bytes:
    """One entry, never more than its declared size (zipfile stops there) nor the archive cap."""
    try:
        with archive.open(entry) as part:
            data = part.read(min(entry.file_size, limits.max_archive_bytes) + 1)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError) as exc:
        raise InvalidDocumentError(f"the DOCX archive is damaged ({entry.filename}: {exc})") from exc
    if len(data) > entry.file_size:
        raise InvalidDocumentError(f"the DOCX archive is damaged ({entry.filename} is larger than it says)")
    return data


def _is_xml(name: str) -> bool:
    return name.lower().endswith((".xml", ".rels"))


def table_markdown(rows: list[list[str]]) -> str:
    """Rows as a Markdown pipe table: the first row is the header, every row padded to one width."""
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = []
    for i, row in enumerate(rows):
        cells = [cell.replace("|", "\\|") for cell in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if i == 0:
            lines.append("|" + "---|" * width)
    return "\n".join(lines)


def _paragraph_images(document: DocxDocument, paragraph: Paragraph, count: int) -> list[tuple[str, ParsedAsset]]:
    """Images drawn in a paragraph (DrawingML blips and legacy VML), with their alt text."""
    found: list[tuple[str, ParsedAsset]] = []
    element = paragraph._element
    refs: list[tuple[str, str]] = []
    for drawing in element.iter(f"{{{_NS['wp']}}}inline", f"{{{_NS['wp']}}}anchor"):
        alt = ""
        for doc_pr in drawing.iter(f"{{{_NS['wp']}}}docPr"):
            alt = (doc_pr.get("descr") or doc_pr.get("title") or "").strip()
        for blip in drawing.iter(f"{{{_NS['a']}}}blip"):
            if embed := blip.get(_EMBED):
                refs.append((embed, alt))
    for image_data in element.iter(f"{{{_NS['v']}}}imagedata"):
        if rid := image_data.get(_RID):
            refs.append((rid, (image_data.get("title") or "").strip()))
    related = document.part.related_parts
    for rid, alt in refs:
        part = related.get(rid)
        if part is None:
            continue
        blob = getattr(part, "blob", None) or b""
        name = str(getattr(part, "partname", rid)).lstrip("/")
        key = f"part-{name}"
        found.append((key, ParsedAsset(locator_key=key, data=blob,
                                       mime_type=getattr(part, "content_type", "application/octet-stream"),
                                       description=" ".join(alt.split()))))
    return found


def _merge_lists(blocks: list[Block]) -> list[Block]:
    """Consecutive list paragraphs become one list block."""
    out: list[Block] = []
    for block in blocks:
        if block.kind == "list" and out and out[-1].kind == "list":
            out[-1] = Block(kind="list", text=out[-1].text + "\n" + block.text)
        else:
            out.append(block)
    return out

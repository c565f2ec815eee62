"""DOCX parser on python-docx: the body read in order (``iter_inner_content``), heading styles as
headings, tables rendered as Markdown pipe tables (kept whole by the chunker where they fit), and
embedded images as assets with their alt text or caption as the description.

Before python-docx sees the file, the zip is checked: entry count and total uncompressed size are
capped (a zip bomb fails here, before anything is inflated), and an XML part that declares a DTD
(the only way to an entity expansion) is refused. python-docx itself parses with
``resolve_entities=False``.
"""

from __future__ import annotations

import io
import re
import zipfile

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument

from .limits import ParseLimits
from .pdf import CAPTION, figure_text

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


class DocxParser:
    extensions = (".docx",)
    name = "docx"
    version = "1.0.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".docx" and detected_kind in (f"binary:{DOCX_MIME}", "binary:application/zip")

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits)
        import docx  # imported here: python-docx pulls in lxml, which only this parser needs

        try:
            document = docx.Document(io.BytesIO(source.content))
        except Exception as exc:
            raise InvalidDocumentError(f"the file is not a readable DOCX document ({exc})"[:300]) from exc
        blocks: list[Block] = []
        assets: dict[str, ParsedAsset] = {}
        pending: list[int] = []  # figure blocks still without a description, waiting for a caption
        for item in document.iter_inner_content():
            if item.__class__.__name__ == "Table":
                text = table_markdown([[_cell_text(c) for c in row.cells] for row in item.rows])
                if text:
                    blocks.append(Block(kind="table", text=text))
                continue
            text = item.text.strip()
            style = (item.style.name if item.style is not None else "") or ""
            for key, asset in _paragraph_images(document, item, len(assets)):
                if key not in assets:
                    assets[key] = asset
                    blocks.append(Block(kind="figure", text=figure_text(asset), asset_ids=(key,)))
                    if not asset.description:
                        pending.append(len(blocks) - 1)
            if not text:
                continue
            if pending and (style.lower() == "caption" or CAPTION.match(text)):
                for index in pending:
                    key = blocks[index].asset_ids[0]
                    assets[key] = ParsedAsset(key, assets[key].data, assets[key].mime_type, description=text)
                    blocks[index] = Block(kind="figure", text=figure_text(assets[key]), asset_ids=(key,))
            pending = []
            match = _HEADING_STYLE.match(style)
            if match or style.lower() == "title":
                level = int(match.group(1)) if match else 1
                blocks.append(Block(kind="heading", text=" ".join(text.split()), level=max(1, min(level, 6))))
            elif style.lower().startswith("list"):
                blocks.append(Block(kind="list", text=f"- {text}"))
            else:
                blocks.append(Block(kind="paragraph", text=text))
        metadata: dict[str, object] = {}
        title = document.core_properties.title
        if title:
            metadata["title"] = title
        return ParsedDocument(blocks=tuple(_merge_lists(blocks)), metadata=metadata, assets=tuple(assets.values()))


def check_archive(content: bytes, limits: ParseLimits) -> None:
    """Refuse zip bombs and DTDs before any part is parsed. Declared sizes are what zipfile
    inflates at most (it stops at ``file_size``), so capping their sum caps the real work."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InvalidDocumentError(f"the file is not a readable DOCX document (bad zip: {exc})") from exc
    with archive:
        entries = archive.infolist()
        if len(entries) > limits.max_archive_entries:
            raise InvalidDocumentError(
                f"the DOCX archive has {len(entries)} entries, more than the limit of {limits.max_archive_entries}")
        total = sum(max(0, e.file_size) for e in entries)
        if total > limits.max_archive_bytes:
            raise InvalidDocumentError(
                f"the DOCX archive unpacks to {total} bytes, more than the limit of {limits.max_archive_bytes} "
                "(a zip bomb?)")
        for entry in entries:
            if not entry.filename.lower().endswith((".xml", ".rels")):
                continue
            try:
                with archive.open(entry) as part:
                    head = part.read(4096)
                    data = head + part.read()
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError) as exc:
                raise InvalidDocumentError(f"the DOCX archive is damaged ({entry.filename}: {exc})") from exc
            if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
                raise InvalidDocumentError(
                    f"the DOCX part {entry.filename} declares a DTD or XML entities, which are refused "
                    "(XML entity expansion)")


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


def _cell_text(cell) -> str:  # type: ignore[no-untyped-def]
    return " ".join(cell.text.split())


def _paragraph_images(document, paragraph, count: int) -> list[tuple[str, ParsedAsset]]:  # type: ignore[no-untyped-def]
    """Images drawn in a paragraph (DrawingML blips and legacy VML), with their alt text."""
    found: list[tuple[str, ParsedAsset]] = []
    element = paragraph._element
    refs: list[tuple[str, str]] = []
    for drawing in element.iter(f"{{{_NS['wp']}}}inline", f"{{{_NS['wp']}}}anchor"):
        alt = ""
        for doc_pr in drawing.iter(f"{{{_NS['wp']}}}docPr"):
            alt = (doc_pr.get("descr") or doc_pr.get("title") or "").strip()
        for blip in drawing.iter(f"{{{_NS['a']}}}blip"):
            if blip.get(_EMBED):
                refs.append((blip.get(_EMBED), alt))
    for image_data in element.iter(f"{{{_NS['v']}}}imagedata"):
        if image_data.get(_RID):
            refs.append((image_data.get(_RID), (image_data.get("title") or "").strip()))
    related = document.part.related_parts
    for rid, alt in refs:
        part = related.get(rid)
        blob = getattr(part, "blob", None)
        if not blob:
            continue
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

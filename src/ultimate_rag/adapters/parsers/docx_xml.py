"""WordprocessingML read where python-docx does not: the block items of a body or cell through
content controls and custom XML, a row's cells, vertical merges, skipped grid columns, and the
images a paragraph draws (DrawingML and legacy VML) with their alt text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ultimate_rag.domain.models import ParsedAsset

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument
    from docx.text.paragraph import Paragraph

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "v": "urn:schemas-microsoft-com:vml",
}
_EMBED = f"{{{NS['r']}}}embed"
RID = f"{{{NS['r']}}}id"
P, TBL, TR, TC = (f"{{{W}}}{n}" for n in ("p", "tbl", "tr", "tc"))
ALT_CHUNK = f"{{{W}}}altChunk"
_WRAPPERS = tuple(f"{{{W}}}{n}" for n in ("sdt", "sdtContent", "customXml"))
_VAL = f"{{{W}}}val"


def through(container: Any, wanted: tuple[str, ...], wrappers: tuple[str, ...] | frozenset[str]) -> Iterator[Any]:
    """The children of ``container`` with a ``wanted`` tag, in order, looking inside ``wrappers``
    (content controls, custom XML, hyperlinks, insertions) as if they were not there."""
    if container is None:
        return
    stack = list(reversed(container))
    while stack:
        child = stack.pop()
        if child.tag in wanted:
            yield child
        elif child.tag in wrappers:
            stack.extend(reversed(child))


def block_elements(container: Any) -> Iterator[Any]:
    """Paragraphs, tables and alt-chunks of a body or cell in order, through block-level content
    controls and custom XML (python-docx reads neither)."""
    return through(container, (P, TBL, ALT_CHUNK), _WRAPPERS)


def row_cells(tr: Any) -> Iterator[Any]:
    """A row's cells, through content controls and custom XML around them."""
    return through(tr, (TC,), _WRAPPERS)


def vertical_merge(tc: Any) -> str:
    """A cell's vertical merge: "restart", "continue" (it belongs to the cell above) or ""."""
    merge = tc.find(f"{{{W}}}tcPr/{{{W}}}vMerge")
    return "" if merge is None else (merge.get(_VAL) or "continue")


def grid_skip(tr: Any, name: str) -> int:
    found = tr.find(f"{{{W}}}trPr/{{{W}}}{name}")
    try:
        return max(0, min(int(found.get(_VAL)), 1000)) if found is not None else 0
    except (TypeError, ValueError):
        return 0


def paragraph_images(document: DocxDocument, paragraph: Paragraph, count: int) -> list[tuple[str, ParsedAsset]]:
    """Images drawn in a paragraph (DrawingML blips and legacy VML), with their alt text."""
    found: list[tuple[str, ParsedAsset]] = []
    element = paragraph._element
    refs: list[tuple[str, str]] = []
    for drawing in element.iter(f"{{{NS['wp']}}}inline", f"{{{NS['wp']}}}anchor"):
        alt = ""
        for doc_pr in drawing.iter(f"{{{NS['wp']}}}docPr"):
            alt = (doc_pr.get("descr") or doc_pr.get("title") or "").strip()
        for blip in drawing.iter(f"{{{NS['a']}}}blip"):
            if embed := blip.get(_EMBED):
                refs.append((embed, alt))
    for image_data in element.iter(f"{{{NS['v']}}}imagedata"):
        if rid := image_data.get(RID):
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

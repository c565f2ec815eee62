"""PowerPoint (PPTX) on python-pptx: every slide is a page (its number is the locator), its title
a heading ("Slide N" when it has none), then its text frames, tables (Markdown) and pictures
(assets, through the gate) in reading order (top to bottom, left to right), then its speaker
notes. Tables are rows under their header (``tables.py``: merged cells resolved), citing the
slide, the table and its rows. The zip is checked first (``packages.check_archive``: entry count,
unpacked size, entity declarations refused), and pictures over the per-image limit are emptied
before python-pptx loads it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator, figure_text

from . import progress
from .assets import AssetGate, with_warnings
from .limits import ParseLimits
from .packages import check_archive, transitional, without_oversized_parts
from .properties import office_properties
from .table_captions import attach_captions
from .tables import Cell, Row, table_blocks

if TYPE_CHECKING:
    from pptx.slide import Slide

PPTX_MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
NOTES_PREFIX = "Speaker notes:"
_FILE_NAME = re.compile(r"^[^\s/]+\.[A-Za-z0-9]{2,5}$")  # "monty-truth.png": says nothing about the picture


class PptxParser:
    extensions = (".pptx",)
    name = "pptx"
    version = "1.2.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".pptx" and detected_kind == f"binary:{PPTX_MIME}"

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits, "PPTX")
        gate = AssetGate(self.limits)
        content = transitional(without_oversized_parts(source.content, gate), self.limits)
        import pptx  # python-pptx, only this parser needs it

        try:
            presentation = pptx.Presentation(io.BytesIO(content))
        except Exception as exc:
            raise InvalidDocumentError(f"the file is not a readable PPTX presentation ({exc})"[:300]) from exc
        slides = list(presentation.slides)
        if len(slides) > self.limits.max_pages:
            raise InvalidDocumentError(
                f"the presentation has {len(slides)} slides, more than the limit of {self.limits.max_pages}")
        blocks: list[Block] = []
        assets: list[ParsedAsset] = []
        tables = [0]
        for number, slide in enumerate(slides, start=1):
            progress.report(number - 1, len(slides))
            blocks.extend(_slide(slide, number, gate, assets, tables))
        progress.report(len(slides), len(slides))
        metadata: dict[str, object] = {"page_count": len(slides),
                                       "properties": office_properties(presentation.core_properties)}
        title = presentation.core_properties.title
        if title:
            metadata["title"] = title
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, gate.warnings),
                              assets=tuple(assets))


def _slide(slide: Slide, number: int, gate: AssetGate, assets: list[ParsedAsset], tables: list[int]) -> list[Block]:
    """The slide's blocks; ``tables``: the count of tables so far in the presentation (updated)."""
    here = SourceLocator(page=number)
    title_shape = slide.shapes.title
    title = _text_of(title_shape) if title_shape is not None else ""
    blocks = [Block(kind="heading", text=title or f"Slide {number}", locator=here, level=1)]
    shapes = [shape for shape in sorted(_shapes(slide.shapes), key=lambda s: (s.top or 0, s.left or 0))
              if title_shape is None or shape.shape_id != title_shape.shape_id]
    # a slide that holds just a table (and its title): the title is the table's caption
    alone = sum(1 for s in shapes if _has_table(s)) == 1 and all(_has_table(s) or not _has_content(s) for s in shapes)
    for shape in shapes:
        if _has_table(shape):
            found = table_blocks(_table_rows(shape.table), table=tables[0] + 1, locator=here,
                                 caption=title if alone else "")
            tables[0] += any(b.kind == "table" for b in found)
            blocks.extend(found)
        elif hasattr(shape, "image"):
            asset = _picture(shape, number, gate)
            if asset is not None:
                assets.append(asset)
                blocks.append(Block(kind="figure", text=figure_text(asset), locator=here,
                                    asset_ids=(asset.locator_key,)))
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            text = _text_of(shape)
            if text:
                blocks.append(Block(kind="paragraph", text=text, locator=here))
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        text = "\n".join(" ".join(p.text.split()) for p in notes.paragraphs if p.text.strip()) if notes else ""
        if text:
            blocks.append(Block(kind="paragraph", text=f"{NOTES_PREFIX} {text}", locator=here))
    return attach_captions(blocks)


def _has_table(shape: Any) -> bool:
    return bool(getattr(shape, "has_table", False) and shape.has_table)


def _has_content(shape: Any) -> bool:
    """The shape shows something of its own: text or a picture."""
    return bool(_text_of(shape)) or hasattr(shape, "image")


def _table_rows(table: Any) -> list[Row]:
    """A slide table's rows: merged cells by their origin (``span_width``/``span_height``), the
    first row a header when the table says so (PowerPoint's "Header Row", on by default)."""
    rows = []
    for r, row in enumerate(table.rows):
        cells = [Cell(" ".join(cell.text.split()), colspan=cell.span_width if cell.is_merge_origin else 1,
                      rowspan=cell.span_height if cell.is_merge_origin else 1)
                 for cell in row.cells if not cell.is_spanned]
        rows.append(Row(cells, header=r == 0 and bool(table.first_row)))
    return rows


def _shapes(shapes: Iterable[Any]) -> Iterator[Any]:
    """Every shape, the members of groups included (a group is not read as one)."""
    stack = list(shapes)
    while stack:
        shape = stack.pop()
        if hasattr(shape, "shapes") and shape.shape_type is not None and int(shape.shape_type) == 6:  # GROUP
            stack.extend(shape.shapes)
        else:
            yield shape


def _text_of(shape: Any) -> str:  # shapes are read by what they have, whatever their class
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return ""
    lines = [" ".join(p.text.split()) for p in shape.text_frame.paragraphs]
    return "\n".join(line for line in lines if line)


def _picture(shape: Any, number: int, gate: AssetGate) -> ParsedAsset | None:
    try:
        image = shape.image
        blob = image.blob
        name = str(image.filename or shape.shape_id)
    except Exception:  # a linked (external) picture or a part emptied as oversized: nothing to keep
        return None
    if not blob:
        return None
    c_nv_pr = shape._element.xpath("./*[1]/p:cNvPr")
    alt = " ".join(((c_nv_pr[0].get("descr") or "") if c_nv_pr else "").split())
    alt = "" if _FILE_NAME.match(alt) else alt
    key = f"slide-{number}/shape-{shape.shape_id}"
    return gate.admit(ParsedAsset(locator_key=key, data=blob, mime_type="application/octet-stream", page=number,
                                  description=alt), f"the picture {name} on slide {number}")

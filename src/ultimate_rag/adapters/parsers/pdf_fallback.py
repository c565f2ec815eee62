"""The second PDF reader, and PDF errors in plain words.

PDFium and MuPDF repair most damaged files, but not all: a page tree whose /Count says 0, or whose
root object is missing (py-pdf's unreadablemetadata.pdf, a linearized file whose /Pages object is
gone), opens with no pages or not at all. The page objects are usually still there:
``rebuild_page_tree`` (pypdf, BSD) collects them in object order into a new file, which the
engine reads as usual (headings, images). A file cut short (no cross-reference table, no trailer,
pypdf cannot read it) has its complete objects copied into a new file under a new page tree
(``salvage_objects``). When even that fails, pypdf reads the text of each page with
``strict=False`` (no headings, no images). Only when both fail does the document fail,
with a reason a user can act on; the libraries' own messages go to the log, never to the user.
"""

from __future__ import annotations

import io
import logging
import re

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, ParsedDocument, SourceLocator

from .limits import ParseLimits
from .text_quality import UNREADABLE_REASON, is_unreadable, unreadable_warnings

log = logging.getLogger(__name__)

DAMAGED = ("the PDF is damaged (corrupt or truncated) and cannot be opened: its internal structure "
           "(the cross-reference table or the page tree) is broken beyond repair")
ENCRYPTED = "the PDF is encrypted with a password; upload it without the password"
FALLBACK_WARNING = ("the PDF's structure is damaged; its text was read with a simpler reader, "
                    "without headings or images")
PAGE_TREE_WARNING = ("the PDF's page tree is damaged; its pages were recovered from the file's objects "
                     "and may not be in their original order")
SALVAGED_WARNING = ("the PDF is damaged (cut short or its cross-reference table is broken); the pages whose "
                    "objects are complete were recovered, others may be missing")
_PARAGRAPHS = re.compile(r"\n\s*\n")
# keys of a page dictionary that are not its content and may lead back into the broken tree
_NOT_CONTENT = ("/Parent", "/Thumb", "/PieceInfo", "/B", "/StructParents", "/Annots")


def rebuild_page_tree(content: bytes) -> bytes | None:
    """A new PDF made of every /Type /Page object of ``content`` (in object order), or None when
    there is none or pypdf cannot write them."""
    import pypdf
    from pypdf.generic import DictionaryObject, IndirectObject

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(content), strict=False)
        if reader.is_encrypted:
            return None
        numbers = sorted({(n, gen) for gen, table in reader.xref.items() for n in table}
                         | {(n, 0) for n in reader.xref_objStm})
        writer = pypdf.PdfWriter()
        for number, generation in numbers:
            ref = IndirectObject(number, generation, reader)
            try:
                obj = ref.get_object()
                if not isinstance(obj, DictionaryObject) or obj.get("/Type") != "/Page":
                    continue
                page = pypdf.PageObject(reader, ref)
                page.update(obj)
                writer.add_page(page, excluded_keys=_NOT_CONTENT)
            except Exception as exc:  # one unreadable page object: the others are still worth having
                log.info("PDF page object %d not recovered: %s: %s", number, exc.__class__.__name__, exc)
        if not writer.pages:
            return None
        out = io.BytesIO()
        writer.write(out)
    except Exception as exc:
        log.warning("PDF page tree could not be rebuilt: %s: %s", exc.__class__.__name__, exc)
        return None
    log.warning("PDF page tree rebuilt from %d page objects", len(writer.pages))
    return out.getvalue()


_OBJECT = re.compile(rb"(?<![0-9])(\d{1,7})\s+(\d{1,5})\s+obj\b(.*?)\bendobj", re.S)
_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def salvage_objects(content: bytes) -> bytes | None:
    """A new PDF made of the complete objects found in ``content`` (a truncated file: the end,
    with its cross-reference table and maybe some pages, is gone), under a new page tree of its
    page objects; None when it holds no page object."""
    objects: dict[int, bytes] = {}
    for match in _OBJECT.finditer(content):
        objects[int(match.group(1))] = match.group(3).strip()
    pages = [number for number, body in objects.items() if _PAGE.search(body)]
    if not pages:
        return None
    tree, catalog = max(objects) + 1, max(objects) + 2
    objects[tree] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % n for n in pages), len(pages))
    objects[catalog] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    out = bytearray(b"%PDF-1.7\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (number, objects[number])
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (catalog + 1)
    out += b"".join(b"%010d 00000 n \n" % offsets[n] if n in offsets else b"0000000000 65535 f \n"
                    for n in range(1, catalog + 1))
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (catalog + 1, catalog, xref)
    log.warning("PDF salvaged: %d complete objects, %d pages", len(objects) - 2, len(pages))
    return bytes(out)


def parse_with_pypdf(content: bytes, limits: ParseLimits, first_error: str) -> ParsedDocument:
    """Read the text of every page with pypdf; InvalidDocumentError (in plain words) when it cannot."""
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(content), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidDocumentError(ENCRYPTED)
        count = len(reader.pages)
    except InvalidDocumentError:
        raise
    except Exception as exc:
        log.warning("PDF unreadable: engine: %s; pypdf: %s: %s", first_error, exc.__class__.__name__, exc)
        raise InvalidDocumentError(DAMAGED) from exc
    if count == 0:
        log.warning("PDF has no pages: engine: %s; pypdf found none either", first_error)
        raise InvalidDocumentError("the PDF is damaged (corrupt or truncated): it has no pages that can be read")
    if count > limits.max_pages:
        raise InvalidDocumentError(f"the PDF has {count} pages, more than the limit of {limits.max_pages}")
    log.warning("PDF read with pypdf after the engine failed: %s", first_error)
    blocks: list[Block] = []
    unreadable: list[int] = []
    for number in range(1, count + 1):
        try:
            text = reader.pages[number - 1].extract_text() or ""
        except Exception as exc:
            log.warning("pypdf could not read page %d: %s: %s", number, exc.__class__.__name__, exc)
            continue
        if is_unreadable(text):
            unreadable.append(number)
            continue
        for paragraph in _PARAGRAPHS.split(text):
            if paragraph.strip():
                blocks.append(Block(kind="paragraph", text=paragraph.strip(), locator=SourceLocator(page=number)))
    if not blocks:
        raise InvalidDocumentError(UNREADABLE_REASON if unreadable else
                                   "the PDF has no extractable text (it may be scanned images only)")
    metadata = {"page_count": count, "pdf_reader": "pypdf",
                "warnings": [FALLBACK_WARNING, *unreadable_warnings(unreadable, (), count)]}
    return ParsedDocument(blocks=tuple(blocks), metadata=metadata)

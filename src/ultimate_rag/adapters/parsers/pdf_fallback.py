"""The second PDF reader, and PDF errors in plain words.

MuPDF repairs most damaged files, but not all: a page tree whose /Count says 0, or whose root
object is missing (py-pdf's unreadablemetadata.pdf, a linearized file whose /Pages object is
gone), opens with no pages. The page objects are usually still there: ``rebuild_page_tree``
collects them in object order under a new page tree, and MuPDF reads the result as usual
(headings, images). Some files do not open at all: pypdf (BSD) walks the page tree itself and
tolerates such damage with ``strict=False``; it reads the text of each page (no headings, no
images). Only when both fail does the document fail, with a reason a user can act on; the
libraries' own messages go to the log, never to the user.
"""

from __future__ import annotations

import io
import logging
import re

import pymupdf

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
_PARAGRAPHS = re.compile(r"\n\s*\n")


def rebuild_page_tree(doc: pymupdf.Document) -> pymupdf.Document | None:
    """A new document whose page tree lists every /Type /Page object of ``doc`` (in object order),
    or None when there is none (or MuPDF cannot write the result)."""
    try:
        pages = [xref for xref in range(1, doc.xref_length()) if _is_page(doc, xref)]
        if not pages:
            return None
        tree = doc.get_new_xref()
        kids = " ".join(f"{xref} 0 R" for xref in pages)
        doc.update_object(tree, f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
        for xref in pages:
            doc.xref_set_key(xref, "Parent", f"{tree} 0 R")
        doc.xref_set_key(doc.pdf_catalog(), "Pages", f"{tree} 0 R")
        rebuilt = pymupdf.open(stream=doc.tobytes(), filetype="pdf")
    except Exception as exc:
        log.warning("PDF page tree could not be rebuilt: %s: %s", exc.__class__.__name__, exc)
        return None
    if rebuilt.page_count == 0:
        rebuilt.close()
        return None
    log.warning("PDF page tree rebuilt from %d page objects", len(pages))
    return rebuilt


def _is_page(doc: pymupdf.Document, xref: int) -> bool:
    try:
        return bool(doc.xref_get_key(xref, "Type") == ("name", "/Page"))
    except Exception:
        return False


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
        log.warning("PDF unreadable: MuPDF: %s; pypdf: %s: %s", first_error, exc.__class__.__name__, exc)
        raise InvalidDocumentError(DAMAGED) from exc
    if count == 0:
        log.warning("PDF has no pages: MuPDF: %s; pypdf found none either", first_error)
        raise InvalidDocumentError("the PDF is damaged (corrupt or truncated): it has no pages that can be read")
    if count > limits.max_pages:
        raise InvalidDocumentError(f"the PDF has {count} pages, more than the limit of {limits.max_pages}")
    log.warning("PDF read with pypdf after MuPDF failed: %s", first_error)
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

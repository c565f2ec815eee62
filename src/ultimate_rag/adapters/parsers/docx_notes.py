"""The parts of a DOCX file around its body: footnotes and endnotes (``word/footnotes.xml``,
``word/endnotes.xml``), comments (python-docx's ``Document.comments``), and page headers and footers.

Footnotes and endnotes are indexed where they are referenced: the paragraph gets a marker
(``[^1]``, ``[^e1]`` for endnotes) and the note follows it as ``[^1] text``. Comments follow the
paragraph they are anchored to as ``[Comment by Author: text]``. Notes and comments that nothing
references come at the end. Headers and footers are indexed once each (``[Header: …]`` first,
``[Footer: …]`` last), unless they only hold a page number or repeat the title.

The note parts are parsed with lxml without entity resolution, DTD loading or network, after
``docx.check_archive`` has refused DTDs and capped the archive's sizes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ultimate_rag.domain.models import Block

from .docx_xml import W, through

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument
    from docx.text.paragraph import Paragraph
    from lxml import etree

_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
_REFS = {f"{{{W}}}footnoteReference": "^", f"{{{W}}}endnoteReference": "^e"}
_COMMENT_REF = f"{{{W}}}commentReference"
_R = f"{{{W}}}r"
_RUBY, _RUBY_BASE, _RUBY_TEXT = f"{{{W}}}ruby", f"{{{W}}}rubyBase", f"{{{W}}}rt"
# elements whose runs are part of the paragraph's text (w:del and w:moveFrom are not)
_RUN_CONTAINERS = frozenset(f"{{{W}}}{name}" for name in (
    "hyperlink", "ins", "smartTag", "sdt", "sdtContent", "customXml", "fldSimple", "moveTo", "dir", "bdo"))
_SKIP_NOTE_TYPES = {"separator", "continuationSeparator", "continuationNotice"}
_PAGE_WORDS = re.compile(r"\b(page|pages|of|p\.|pg\.?)\b|페이지|쪽|[第页頁共/\-–—|.,:()\s\d]", re.IGNORECASE)


@dataclass
class Notes:
    notes: dict[str, str] = field(default_factory=dict)  # marker ("^1", "^e2") -> text
    comments: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (author, text)
    used: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, document: DocxDocument) -> Notes:
        found = cls()
        for rel in document.part.rels.values():
            if rel.is_external:
                continue
            kind = rel.reltype.rsplit("/", 1)[-1]
            if kind in ("footnotes", "endnotes"):
                prefix = "^" if kind == "footnotes" else "^e"
                found.notes |= {prefix + k: v for k, v in _note_texts(rel.target_part.blob, kind[:-1]).items()}
            elif kind == "comments":
                for comment in document.comments:
                    text = " ".join(comment.text.split())
                    if text:
                        found.comments[str(comment.comment_id)] = (" ".join((comment.author or "").split()), text)
        return found

    def paragraph_text(self, paragraph: Paragraph) -> tuple[str, list[str]]:
        """The paragraph's text with note markers where the notes are referenced, and the keys of
        the notes and comments it references (``^1``, ``^e1``, ``c:0``) in order. Runs inside
        hyperlinks, insertions, content controls, smart tags and simple fields are read (deleted
        text is not); ruby (furigana) keeps its base text in place and its readings follow the
        paragraph in parentheses: ``東京に行く (東京: とうきょう)``."""
        element = paragraph._element
        refs = [key for key in (_ref_key(e) for e in element.iter(*_REFS, _COMMENT_REF)) if key]
        parts: list[str] = []
        readings: list[str] = []
        for run in _runs(element):
            ruby = run.find(_RUBY)
            if ruby is not None:
                base = "".join(r.text for r in _runs(ruby.find(_RUBY_BASE)))
                reading = "".join(r.text for r in _runs(ruby.find(_RUBY_TEXT)))
                parts.append(base)
                if reading.strip() and base.strip():
                    readings.append(f"{base.strip()}: {reading.strip()}")
            parts.append(run.text)
            parts.extend(f"[{key}]" for key in (_ref_key(e) for e in run.iter(*_REFS)) if key)
        text = "".join(parts)
        if readings:
            text = f"{text.rstrip()} ({'; '.join(dict.fromkeys(readings))})"
        return text, refs

    def blocks_for(self, refs: list[str]) -> list[Block]:
        """The notes and comments that follow a paragraph (or table) referencing them, once each."""
        out = []
        for key in refs:
            if key in self.used:
                continue
            self.used.add(key)
            if key.startswith("c:") and key[2:] in self.comments:
                author, text = self.comments[key[2:]]
                out.append(Block(kind="paragraph", text=f"[Comment by {author or 'unknown'}: {text}]"))
            elif key in self.notes:
                out.append(Block(kind="paragraph", text=f"[{key}] {self.notes[key]}"))
        return out

    def leftovers(self) -> list[Block]:
        """Notes and comments nothing in the body references: never lost, listed at the end."""
        return self.blocks_for([*self.notes, *(f"c:{k}" for k in self.comments)])


def _runs(container: Any) -> Iterator[Any]:
    """The ``w:r`` runs of a paragraph (or ruby part) in order, through the elements that wrap runs;
    deleted and moved-away text is not read. Runs are python-docx's ``CT_R`` (``.text``)."""
    return through(container, (_R,), _RUN_CONTAINERS)


def _ref_key(element: etree._Element) -> str:
    ident = element.get(f"{{{W}}}id")
    if ident is None:
        return ""
    return f"c:{ident}" if element.tag == _COMMENT_REF else _REFS[str(element.tag)] + ident


def _note_texts(blob: bytes, tag: str) -> dict[str, str]:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(blob, parser=parser)
    except etree.XMLSyntaxError:
        return {}  # a damaged notes part does not fail the body
    out: dict[str, str] = {}
    for note in root.iter(f"{{{W}}}{tag}"):
        ident = note.get(f"{{{W}}}id")
        if ident is None or note.get(f"{{{W}}}type") in _SKIP_NOTE_TYPES:
            continue
        paragraphs = ["".join(_run_text(p)) for p in note.iter(f"{{{W}}}p")]
        text = " ".join(" ".join(paragraphs).split())
        if text:
            out[ident] = text
    return out


def _run_text(paragraph: etree._Element) -> Iterator[str]:
    for element in paragraph.iter(f"{{{W}}}t", f"{{{W}}}tab", f"{{{W}}}br"):
        yield (element.text or "") if element.tag == f"{{{W}}}t" else " "


def header_footer_blocks(document: DocxDocument, title: str) -> tuple[list[Block], list[Block]]:
    """Each distinct header and footer once, unless it is only a page number or the title."""
    seen = {_norm(title)} if title else set()
    headers: list[Block] = []
    footers: list[Block] = []
    for section in document.sections:
        for attr, label, out in (("first_page_header", "Header", headers), ("header", "Header", headers),
                                 ("even_page_header", "Header", headers), ("first_page_footer", "Footer", footers),
                                 ("footer", "Footer", footers), ("even_page_footer", "Footer", footers)):
            part = getattr(section, attr)
            if part.is_linked_to_previous:
                continue
            lines = [p.text for p in part.paragraphs]
            for table in part.tables:
                lines.extend(cell.text for row in table.rows for cell in row.cells)
            text = " ".join(" ".join(lines).split())
            if not text or not _PAGE_WORDS.sub("", text) or _norm(text) in seen:
                continue
            seen.add(_norm(text))
            out.append(Block(kind="paragraph", text=f"[{label}: {text}]"))
    return headers, footers


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())

"""A file's own properties — title, author, created, modified — as each format keeps them (PDF's
document information dictionary, OOXML's core properties, ODF's meta.xml, EPUB's package
metadata), for ``ParsedDocument.metadata["properties"]``: the document's ``doc`` metadata
(domain/metadata.py). Dates become ISO 8601; what is missing or unreadable is left out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...domain.metadata import document_properties

# D:YYYYMMDDHHmmSS, every part after the year optional, then Z or +HH'mm' (PDF 1.7, 7.9.4)
_PDF_DATE = re.compile(r"^D?:?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(Z|[+-]\d{2}'?\d{2}'?)?")


def pdf_date(value: object) -> str | None:
    """A PDF date string as ISO 8601 (a date alone when it has no time), None when it is not one."""
    match = _PDF_DATE.match(str(value or "").strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, zone = match.groups()
    date = f"{year}-{month or '01'}-{day or '01'}"
    if hour is None:
        return date
    offset = "" if zone is None else "Z" if zone == "Z" else f"{zone[:3]}:{zone.replace(chr(39), '')[3:5] or '00'}"
    return f"{date}T{hour}:{minute or '00'}:{second or '00'}{offset}"


def pdf_properties(info: Mapping[str, str]) -> dict[str, Any]:
    """From a PDF engine's ``metadata`` (pdf_engine.OpenedPdf: title, author, creation_date,
    mod_date as the information dictionary writes them)."""
    return document_properties(title=info.get("title"), author=info.get("author"),
                               created=pdf_date(info.get("creation_date")), modified=pdf_date(info.get("mod_date")))


def office_properties(core: Any) -> dict[str, Any]:
    """From python-docx's or python-pptx's ``core_properties`` (docProps/core.xml)."""
    return document_properties(title=core.title, author=core.author, created=core.created, modified=core.modified)


_DC = "{http://purl.org/dc/elements/1.1/}"
_META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"
_OPF = "{http://www.idpf.org/2007/opf}"


def _text(root: Any, path: str) -> str | None:
    found = root.findtext(path)
    return " ".join(found.split()) if found and found.strip() else None


def odf_properties(meta: Any) -> dict[str, Any]:
    """From ODF's meta.xml (parsed): dc:title, meta:initial-creator (else dc:creator),
    meta:creation-date, dc:date."""
    return document_properties(title=_text(meta, f".//{_DC}title"),
                               author=_text(meta, f".//{_META}initial-creator") or _text(meta, f".//{_DC}creator"),
                               created=_text(meta, f".//{_META}creation-date"), modified=_text(meta, f".//{_DC}date"))


def epub_properties(opf: Any) -> dict[str, Any]:
    """From the EPUB package document: dc:title, dc:creator(s), dc:date, dcterms:modified."""
    creators = [" ".join(c.text.split()) for c in opf.iter(f"{_DC}creator") if c.text and c.text.strip()]
    modified = next((" ".join(m.text.split()) for m in opf.iter(f"{_OPF}meta")
                     if m.get("property") == "dcterms:modified" and m.text), None)
    return document_properties(title=_text(opf, f".//{_DC}title"),
                               author=creators[0] if len(creators) == 1 else creators or None,
                               created=_text(opf, f".//{_DC}date"), modified=modified)

"""Zip packages (DOCX, PPTX, XLSX, EPUB, ODT/ODS/ODP) checked before any part is parsed.

* **Zip bombs**: the entry count and the sum of declared sizes are capped (zipfile never inflates
  past a declared size, so the cap bounds the real work).
* **Entity expansion**: an XML part that declares entities or has a DOCTYPE with an internal
  subset (``<!DOCTYPE x [ … ]>``, the only place a declaration can live) is refused. A DOCTYPE
  that only names a public or system identifier (EPUB 2's NCX and XHTML chapters, OpenOffice's
  MathML objects, an HTML ``<!DOCTYPE html>``) declares nothing and is allowed: every XML parser
  here runs without loading DTDs or touching the network. The check reads the part in its own
  encoding (byte-order mark, UTF-16/32 or EBCDIC signature, or the declared ``encoding``), so a
  UTF-16 part cannot hide a declaration from it.
* **Oversized binary parts** (images, embedded objects) are emptied before python-docx or
  python-pptx loads the package (they read every part whole).
* **Strict OOXML** (ISO/IEC 29500 Strict, ``http://purl.oclc.org/ooxml/…`` namespaces) is
  rewritten to the transitional namespaces the libraries read; the markup is otherwise the same.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile

from ultimate_rag.domain.errors import InvalidDocumentError

from .assets import AssetGate
from .limits import ParseLimits

# parts checked for DTDs: OOXML/ODF XML and relationships, EPUB packages, navigation and XHTML
XML_SUFFIXES = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg")
_ID = r"""(?:"[^"]*"|'[^']*')"""
# a DOCTYPE that declares nothing: a name, then at most an external (public/system) identifier
_PLAIN = rf"<!DOCTYPE\s+[^\s\[>]+(?:\s+(?:SYSTEM\s+{_ID}|PUBLIC\s+{_ID}(?:\s+{_ID})?))?\s*>"
_PLAIN_TEXT, _PLAIN_BYTES = re.compile(_PLAIN, re.IGNORECASE), re.compile(_PLAIN.encode(), re.IGNORECASE)
_DOCTYPE_TEXT, _DOCTYPE_BYTES = re.compile("<!DOCTYPE", re.IGNORECASE), re.compile(b"<!DOCTYPE", re.IGNORECASE)
_DECLARED = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']""")
_SIGNATURES = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
               (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
               (b"\x00\x00\x00<", "utf-32-be"), (b"<\x00\x00\x00", "utf-32-le"),
               (b"\x00<\x00", "utf-16-be"), (b"<\x00", "utf-16-le"), (b"\x4c\x6f\xa7\x94", "cp037"))
_ASCII_SAFE = frozenset({"ascii", "utf-8", "utf-8-sig", "latin-1", "iso8859-1", "cp1252"})
_STRICT = re.compile(rb"http://purl\.oclc\.org/ooxml/(\w+)/")
_STRICT_PARTS = (".xml", ".rels")


def check_archive(content: bytes, limits: ParseLimits, what: str = "DOCX") -> None:
    """Refuse zip bombs, encrypted entries and XML declarations before any part is parsed
    (``what`` names the format in the reasons)."""
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
            if entry.flag_bits & 0x1:
                raise InvalidDocumentError(f"the {what} document is encrypted with a password ({entry.filename}); "
                                           "remove the password and upload it again")
            if not entry.filename.lower().endswith(XML_SUFFIXES):
                continue
            reason = declaration_refused(read_capped(archive, entry, limits, what))
            if reason:
                raise InvalidDocumentError(f"the {what} part {entry.filename} {reason}, which is refused "
                                           "(XML entity expansion)")


def declaration_refused(data: bytes) -> str:
    """What the XML (or XHTML) part declares that is refused, or "" when it declares nothing:
    entities anywhere, or a DOCTYPE with an internal subset. Read as bytes (any ASCII-compatible
    encoding) and, for other encodings, decoded."""
    views: list[bytes | str] = [data]
    encoding = _encoding(data)
    if encoding not in _ASCII_SAFE:
        try:
            views.append(data.decode(encoding, errors="replace"))
        except LookupError:  # an encoding Python does not know: the bytes are all we can read
            pass
    for view in views:
        if isinstance(view, bytes):
            entities = b"<!ENTITY" in view
            subset = any(not _PLAIN_BYTES.match(view, m.start()) for m in _DOCTYPE_BYTES.finditer(view))
        else:
            entities = "<!ENTITY" in view
            subset = any(not _PLAIN_TEXT.match(view, m.start()) for m in _DOCTYPE_TEXT.finditer(view))
        if entities:
            return "declares a DTD with XML entities"
        if subset:
            return "declares a DTD with an internal subset"
    return ""


def _encoding(data: bytes) -> str:
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    declared = _DECLARED.match(data[:256])
    if declared is None:
        return "utf-8"
    name = declared.group(1).decode("ascii").lower()
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name


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
                data = b"" if entry.filename in oversized else read_capped(archive, entry, gate.limits)
                rebuilt.writestr(entry.filename, data)
    return out.getvalue()


def transitional(content: bytes, limits: ParseLimits) -> bytes:
    """A Strict OOXML package with its namespaces and relationship types rewritten to the
    transitional ones (``purl.oclc.org/ooxml/spreadsheetml/main`` →
    ``schemas.openxmlformats.org/spreadsheetml/2006/main``); the original bytes for any other."""
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        entries = archive.infolist()
        rels = next((e for e in entries if e.filename == "_rels/.rels"), None)
        if rels is None or not _STRICT.search(read_capped(archive, rels, limits)):
            return content
        parts = {e.filename: read_capped(archive, e, limits) for e in entries}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as rebuilt:
        for entry in entries:
            data = parts[entry.filename]
            if entry.filename.lower().endswith(_STRICT_PARTS):
                data = _STRICT.sub(rb"http://schemas.openxmlformats.org/\1/2006/", data)
            rebuilt.writestr(entry.filename, data)
    return out.getvalue()


def read_capped(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, limits: ParseLimits, what: str = "DOCX") -> bytes:
    """One entry, never more than its declared size (zipfile stops there) nor the archive cap."""
    try:
        with archive.open(entry) as part:
            data = part.read(min(entry.file_size, limits.max_archive_bytes) + 1)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError) as exc:
        raise InvalidDocumentError(f"the {what} archive is damaged ({entry.filename}: {exc})"[:300]) from exc
    if len(data) > entry.file_size:
        raise InvalidDocumentError(f"the {what} archive is damaged ({entry.filename} is larger than it says)")
    return data


def _is_xml(name: str) -> bool:
    return name.lower().endswith((".xml", ".rels"))

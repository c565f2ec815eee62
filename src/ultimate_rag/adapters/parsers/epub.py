"""EPUB 2 and 3 read with zipfile and lxml (ebooklib is AGPL-3.0: not used). The package document
(``META-INF/container.xml`` → the OPF) gives the reading order (the spine); every chapter is an
XHTML file walked like an HTML page (``html_walk.py``: headings, paragraphs, lists, tables,
images), so chapters and their headings are the structure. A chapter without a heading gets its
title from the table of contents (EPUB 3 ``nav``, EPUB 2 NCX) as a level-1 heading. Images are
read from the package through the gate; nothing outside the package is ever fetched.

The zip is checked first (``docx.check_archive``: entries, unpacked size, DTDs refused — the
XHTML DOCTYPE of EPUB 2 is removed before that check sees it, it declares nothing).
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING, Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, figure_text

from . import progress
from .assets import AssetGate, with_warnings
from .docx import check_archive
from .html import _max_depth, safe_parser, strip_page
from .html_walk import Walker
from .limits import ParseLimits
from .zipxml import parse_xml, read_part, resolve

if TYPE_CHECKING:
    from lxml.html import HtmlElement

EPUB_KIND = "binary:application/epub+zip"
_CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
_OPF = "http://www.idpf.org/2007/opf"
_DC = "http://purl.org/dc/elements/1.1/"
_NCX = "http://www.daisy.org/z3986/2005/ncx/"
# an XHTML DOCTYPE with at most a public identifier and nothing inside (EPUB 2's XHTML 1.1 one,
# EPUB 3's <!DOCTYPE html>): safe, and in almost every chapter
_PLAIN_DOCTYPE = re.compile(rb"<!DOCTYPE\s+html(\s+PUBLIC\s+\"[^\"<>\[]*\"\s+\"[^\"<>\[]*\")?\s*>", re.IGNORECASE)
_HTML_TYPES = ("application/xhtml+xml", "text/html")


class EpubParser:
    extensions = (".epub",)
    name = "epub"
    version = "1.0.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".epub" and detected_kind == EPUB_KIND

    def parse(self, source: DocumentSource) -> ParsedDocument:
        content = _without_plain_doctypes(source.content, self.limits)
        check_archive(content, self.limits, "EPUB")
        gate = AssetGate(self.limits)
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            opf_name = self._rootfile(archive)
            opf = self._xml(archive, opf_name)
            manifest = {item.get("id"): (resolve(opf_name, item.get("href") or ""), item.get("media-type") or "")
                        for item in opf.iter(f"{{{_OPF}}}item")}
            # each chapter file once: a spine that lists one file 100 000 times is not 100 000 chapters
            spine = list(dict.fromkeys(manifest[ref.get("idref")] for ref in opf.iter(f"{{{_OPF}}}itemref")
                                       if ref.get("idref") in manifest
                                       and manifest[ref.get("idref")][1] in _HTML_TYPES))
            titles = self._toc(archive, opf, manifest)
            blocks: list[Block] = []
            assets: list[ParsedAsset] = []
            for index, (name, _) in enumerate(spine):
                progress.report(index, len(spine))
                walker = _ChapterWalker(gate, archive, name, self.limits, len(assets))
                self._chapter(archive, name, walker)
                if walker.blocks and not any(b.kind == "heading" for b in walker.blocks) and titles.get(name):
                    walker.blocks.insert(0, Block(kind="heading", text=titles[name], level=1))
                blocks.extend(walker.blocks)
                assets.extend(walker.assets)
            progress.report(len(spine), len(spine))
        metadata: dict[str, Any] = {"chapters": len(spine)}
        title = opf.findtext(f".//{{{_DC}}}title")
        if title and title.strip():
            metadata["title"] = " ".join(title.split())
        return ParsedDocument(blocks=tuple(blocks), metadata=with_warnings(metadata, gate.warnings),
                              assets=tuple(assets))

    def _xml(self, archive: zipfile.ZipFile, name: str) -> Any:
        data = read_part(archive, name, self.limits, "EPUB")
        if data is None:
            raise InvalidDocumentError(f"the EPUB package has no {name}")
        return parse_xml(data, name, "EPUB")

    def _rootfile(self, archive: zipfile.ZipFile) -> str:
        container = self._xml(archive, "META-INF/container.xml")
        for rootfile in container.iter(f"{{{_CONTAINER}}}rootfile"):
            if rootfile.get("full-path"):
                return str(rootfile.get("full-path")).lstrip("/")
        raise InvalidDocumentError("the EPUB package names no package document (OPF)")

    def _toc(self, archive: zipfile.ZipFile, opf: Any, manifest: dict[Any, tuple[str, str]]) -> dict[str, str]:
        """Chapter file → its title in the table of contents (first entry per file)."""
        titles: dict[str, str] = {}
        for item in opf.iter(f"{{{_OPF}}}item"):
            name, media = manifest.get(item.get("id"), ("", ""))
            is_nav = "nav" in (item.get("properties") or "").split()
            if not (is_nav or media == "application/x-dtbncx+xml") or name not in archive.namelist():
                continue
            root = self._xml(archive, name)
            if is_nav:
                entries = [(a.get("href") or "", "".join(a.itertext())) for a in root.iter("{*}a")]
            else:
                entries = [(c.get("src") or "", "".join(p.findtext(f"{{{_NCX}}}text") or "" for p in
                                                        point.findall(f"{{{_NCX}}}navLabel")))
                           for point in root.iter(f"{{{_NCX}}}navPoint") for c in point.findall(f"{{{_NCX}}}content")]
            for href, text in entries:
                text = " ".join(text.split())
                if href and text:
                    titles.setdefault(resolve(name, href), text)
        return titles

    def _chapter(self, archive: zipfile.ZipFile, name: str, walker: Walker) -> None:
        import lxml.html

        data = read_part(archive, name, self.limits, "EPUB")
        if not data or not data.strip():
            return
        try:
            root = lxml.html.document_fromstring(data, parser=safe_parser())
        except Exception as exc:
            raise InvalidDocumentError(f"the EPUB chapter {name} cannot be parsed ({exc})"[:300]) from exc
        if _max_depth(root) > self.limits.max_html_depth:
            raise InvalidDocumentError(f"the EPUB chapter {name} is nested more than "
                                       f"{self.limits.max_html_depth} elements deep")
        strip_page(root)
        body = root.find(".//body")
        walker.walk(body if body is not None else root)


class _ChapterWalker(Walker):
    """html_walk's walker, with images read from the package (``src`` relative to the chapter)."""

    def __init__(self, gate: AssetGate, archive: zipfile.ZipFile, chapter: str, limits: ParseLimits,
                 first: int) -> None:
        super().__init__(gate)
        self.archive, self.chapter, self.limits, self.first = archive, chapter, limits, first

    def _image(self, element: HtmlElement) -> None:
        src = (element.get("src") or element.get("{http://www.w3.org/1999/xlink}href") or "").strip()
        if not src or ":" in src.split("/", 1)[0]:
            return super()._image(element)
        name = resolve(self.chapter, src)
        try:
            entry = self.archive.getinfo(name)
        except KeyError:
            return super()._image(element)
        what = f"the image {name}"
        if self.gate.too_large(entry.file_size, what):
            return None
        alt = " ".join((element.get("alt") or "").split())
        key = f"part-{name}"
        if any(a.locator_key == key for a in self.assets):
            return None
        data = read_part(self.archive, name, self.limits, "EPUB") or b""
        asset = self.gate.admit(ParsedAsset(locator_key=key, data=data, mime_type="application/octet-stream",
                                            description=alt), what)
        if asset is None:
            return super()._image(element)
        self.assets.append(asset)
        self._flush()
        self.blocks.append(Block(kind="figure", text=figure_text(asset), asset_ids=(key,)))
        return None


def _without_plain_doctypes(content: bytes, limits: ParseLimits) -> bytes:
    """The package with the plain XHTML DOCTYPEs of its chapters removed (EPUB 2 writes one into
    every chapter; it declares no entity), so that the DTD check refuses only real declarations.
    Only when a chapter has one: otherwise the original bytes."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InvalidDocumentError(f"the file is not a readable EPUB document (bad zip: {exc})") from exc
    with archive:
        entries = archive.infolist()
        if len(entries) > limits.max_archive_entries or \
                sum(max(0, e.file_size) for e in entries) > limits.max_archive_bytes:
            return content  # check_archive says why
        names = [e.filename for e in entries if e.filename.lower().endswith((".xhtml", ".html", ".htm"))]
        parts = {n: read_part(archive, n, limits, "EPUB") or b"" for n in names}
        changed = {n: _PLAIN_DOCTYPE.sub(b"", d[:2048], count=1) + d[2048:] for n, d in parts.items()}
        if all(changed[n] == parts[n] for n in names):
            return content
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as rebuilt:
            for entry in entries:
                data = changed.get(entry.filename)
                rebuilt.writestr(entry.filename, data if data is not None
                                 else read_part(archive, entry.filename, limits, "EPUB") or b"")
    return out.getvalue()

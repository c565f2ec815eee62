"""EPUB 2 and 3 read with zipfile and lxml (ebooklib is AGPL-3.0: not used). The package document
(``META-INF/container.xml`` → the OPF) gives the reading order (the spine); every chapter is an
XHTML file walked like an HTML page (``html_walk.py``: headings, paragraphs, lists, tables,
images), so chapters and their headings are the structure. A chapter without a heading gets its
title from the table of contents (EPUB 3 ``nav``, EPUB 2 NCX) as a level-1 heading. Images are
read from the package through the gate; nothing outside the package is ever fetched.

Every block cites its chapter file and the ``id`` it sits under (``anchor``:
``OEBPS/ch1.xhtml#section-2``), and its ordinal in the book (``paragraph_start``); tables cite
their rows.

The zip is checked first (``packages.check_archive``: entries, unpacked size, entity declarations
and internal DTD subsets refused; EPUB 2's public DOCTYPEs in its NCX and chapters declare
nothing and are read).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import Block, DocumentSource, ParsedAsset, ParsedDocument, SourceLocator, figure_text

from . import progress
from .assets import AssetGate, with_warnings
from .html import _max_depth, safe_parser, strip_page
from .html_walk import Walker
from .limits import ParseLimits
from .packages import check_archive
from .properties import epub_properties
from .table_captions import attach_captions
from .zipxml import parse_xml, read_part, resolve

if TYPE_CHECKING:
    from lxml.html import HtmlElement

EPUB_KIND = "binary:application/epub+zip"
_CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
_OPF = "http://www.idpf.org/2007/opf"
_DC = "http://purl.org/dc/elements/1.1/"
_NCX = "http://www.daisy.org/z3986/2005/ncx/"
_HTML_TYPES = ("application/xhtml+xml", "text/html")


class EpubParser:
    extensions = (".epub",)
    name = "epub"
    version = "1.2.0"

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()

    def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
        return source.extension == ".epub" and detected_kind == EPUB_KIND

    def parse(self, source: DocumentSource) -> ParsedDocument:
        check_archive(source.content, self.limits, "EPUB")
        gate = AssetGate(self.limits)
        with zipfile.ZipFile(io.BytesIO(source.content)) as archive:
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
                first = len(blocks) + 1
                blocks.extend(_in_chapter(block, name, first + k)
                              for k, block in enumerate(attach_captions(walker.blocks, walker.captions)))
                assets.extend(walker.assets)
            progress.report(len(spine), len(spine))
        metadata: dict[str, Any] = {"chapters": len(spine), "properties": epub_properties(opf)}
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
        self.blocks.append(Block(kind="figure", text=figure_text(asset), asset_ids=(key,), locator=self._here()))
        return None


def _in_chapter(block: Block, chapter: str, number: int) -> Block:
    """A chapter's block with its anchor in the book (``chapter#id``) and its ordinal in it."""

    def at(loc: SourceLocator) -> SourceLocator:
        anchor = f"{chapter}#{loc.anchor}" if loc.anchor else chapter
        return replace(loc, anchor=anchor, paragraph_start=number, paragraph_end=number)

    return replace(block, locator=at(block.locator), rows=tuple(at(r) for r in block.rows))

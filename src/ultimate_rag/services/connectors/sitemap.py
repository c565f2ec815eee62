"""``sitemap``: pages listed by a sitemap (or a sitemap index, followed a bounded number of levels).

A sitemap is hostile input read inside a worker, so it is never held whole: the bytes are fed, as
they are downloaded, through an incremental gzip inflater (when gzipped) and an incremental lxml
parser that builds no tree — only the ``<loc>`` values are kept. The decompressed size is capped
(``CONNECTOR_SITEMAP_MAX_BYTES``: a gzip bomb is refused after that many bytes, never inflated
whole), reading stops at the item limit, and any DTD is refused by the parser itself whatever the
document's encoding (entities are never resolved, nothing is loaded from the network)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, cast

from lxml import etree

from ...domain.errors import PermanentError

KINDS = ("urlset", "sitemapindex")
_PIECE = 64 * 1024  # inflated bytes handed to the parser at a time
_MAX_LOC = 4096


class SitemapError(PermanentError):
    """The sitemap is refused (too large, a DTD, not XML, not a sitemap)."""


class Enough(Exception):  # not an error: the caller has all the items it wants
    """Raised by the reader once ``on_loc`` says no more are wanted; the download stops."""


class _Target:
    """lxml parser target: keeps the text of ``<loc>`` elements, refuses DTDs."""

    def __init__(self, on_loc: Callable[[str, str], bool]) -> None:
        self.kind = ""
        self._on_loc = on_loc
        self._loc: list[str] | None = None
        self._size = 0

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise SitemapError("the sitemap declares a DOCTYPE or entities, which are not accepted")

    def start(self, tag: str, attrib: object) -> None:
        local = tag.rsplit("}", 1)[-1]
        if not self.kind:
            if local not in KINDS:
                raise SitemapError(f"not a sitemap (root element {local[:100]!r})")
            self.kind = local
        elif local == "loc":
            self._loc, self._size = [], 0

    def data(self, text: str) -> None:
        if self._loc is not None and self._size < _MAX_LOC:
            self._loc.append(text)
            self._size += len(text)

    def end(self, tag: str) -> None:
        if self._loc is not None and tag.rsplit("}", 1)[-1] == "loc":
            loc, self._loc = "".join(self._loc).strip(), None
            if loc and not self._on_loc(self.kind, loc):
                raise Enough

    def comment(self, text: str) -> None:
        pass

    def pi(self, target: str, data: str) -> None:
        pass

    def close(self) -> str:
        return self.kind


class _Inflate:
    """Passes bytes on, inflating them first (in bounded pieces) when they start as gzip."""

    def __init__(self, out: Callable[[bytes], None]) -> None:
        self._out = out
        self._head = b""
        self._decided = False
        self._inflater: Any = None

    def feed(self, chunk: bytes) -> None:
        if not self._decided:
            self._head += chunk
            if len(self._head) < 2:
                return
            chunk, self._head, self._decided = self._head, b"", True
            if chunk[:2] == b"\x1f\x8b":
                self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self._inflater is None:
            self._out(chunk)
            return
        try:
            self._out(self._inflater.decompress(chunk, _PIECE))
            while self._inflater.unconsumed_tail:
                self._out(self._inflater.decompress(self._inflater.unconsumed_tail, _PIECE))
        except zlib.error as exc:
            raise SitemapError("the sitemap is not valid gzip") from exc

    def close(self) -> None:
        if not self._decided:
            self._decided = True
            self._out(self._head)
        elif self._inflater is not None:
            if not self._inflater.eof:
                raise SitemapError("the sitemap is not valid gzip (truncated)")


class SitemapReader:
    """Feed it the downloaded bytes (``feed``), then ``close``: it calls ``on_loc(kind, loc)`` for
    every ``<loc>`` as it is parsed (returning False stops reading with ``Enough``). Gzip is
    inflated, twice at most (a ``.xml.gz`` file served with ``Content-Encoding: gzip``)."""

    def __init__(self, max_bytes: int, on_loc: Callable[[str, str], bool]) -> None:
        self.max_bytes = max_bytes
        self._target = _Target(on_loc)
        # lxml calls only the target methods that exist; the stubs' ParserTarget protocol lists them all
        target = cast("etree.ParserTarget[str]", self._target)
        self._parser = etree.XMLParser(target=target, resolve_entities=False, no_network=True,
                                       huge_tree=False, load_dtd=False, dtd_validation=False)
        self._inner = _Inflate(self._parse)
        self._outer = _Inflate(self._inner.feed)
        self.size = 0  # bytes given to the parser (decompressed)

    @property
    def kind(self) -> str:
        return self._target.kind

    def feed(self, chunk: bytes) -> None:
        self._outer.feed(chunk)

    def _parse(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if self.size > self.max_bytes:
            raise SitemapError(f"the sitemap is larger than the limit of {self.max_bytes} bytes "
                                 "(decompressed; ULTIMATE_RAG_CONNECTOR_SITEMAP_MAX_BYTES)")
        try:
            self._parser.feed(data)
        except etree.XMLSyntaxError as exc:
            raise SitemapError(f"the sitemap is not valid XML: {exc}"[:500]) from exc

    def close(self) -> str:
        """The sitemap's kind ("urlset" | "sitemapindex")."""
        self._outer.close()
        self._inner.close()
        if self.size == 0:
            raise SitemapError("the sitemap is empty")
        try:
            self._parser.close()
        except etree.XMLSyntaxError as exc:
            raise SitemapError(f"the sitemap is not valid XML: {exc}"[:500]) from exc
        return self._target.kind


def parse_sitemap(data: bytes, max_bytes: int, max_items: int = 1_000_000) -> tuple[str, list[str]]:
    """("urlset" | "sitemapindex", the first ``max_items`` <loc> values) of a sitemap held in memory."""
    locs: list[str] = []

    def keep(kind: str, loc: str) -> bool:
        locs.append(loc)
        return len(locs) < max_items

    reader = SitemapReader(max_bytes, keep)
    try:
        reader.feed(data)
        kind = reader.close()
    except Enough:
        kind = reader.kind
    return kind, locs

"""Reading XML parts of a zip package (OpenDocument, EPUB) safely: entries are read no larger than
they declare (and never past the archive cap), and parsed by lxml with no DTD loading, no entity
resolution and no network. ``packages.check_archive`` has already refused declarations and zip bombs."""

from __future__ import annotations

import posixpath
import zipfile
from typing import Any

from ultimate_rag.domain.errors import InvalidDocumentError

from .limits import ParseLimits
from .packages import read_capped


def read_part(archive: zipfile.ZipFile, name: str, limits: ParseLimits, what: str) -> bytes | None:
    """The bytes of one entry, None when the package has no such entry."""
    try:
        entry = archive.getinfo(name)
    except KeyError:
        return None
    return read_capped(archive, entry, limits, what)


def parse_xml(data: bytes, name: str, what: str) -> Any:
    """The root element of an XML part; InvalidDocumentError when it is not well-formed."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                             remove_comments=True, remove_pis=True)
    try:
        return etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise InvalidDocumentError(f"the {what} part {name} is not well-formed XML ({exc})"[:300]) from exc


def resolve(base: str, href: str) -> str:
    """A package-relative reference (``../images/a.png`` from ``OEBPS/text/c1.xhtml``) as an entry name."""
    href = href.split("#", 1)[0]
    from urllib.parse import unquote

    return posixpath.normpath(posixpath.join(posixpath.dirname(base), unquote(href))).lstrip("/")

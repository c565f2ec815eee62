"""A file's own properties become the document's ``doc`` metadata (title, author, created,
modified): PDF, DOCX, PPTX, EPUB and ODF files built here as their writers make them."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime

import pymupdf
import pytest
from docx import Document as DocxDocument

from ultimate_rag.adapters.parsers.properties import pdf_date
from ultimate_rag.domain.metadata import parsed_fields

from .office_builders import make_epub, make_odf, make_pptx
from .test_format_parsers import parse


@pytest.mark.parametrize(("raw", "iso"), [
    ("D:20240105103000+01'00'", "2024-01-05T10:30:00+01:00"), ("D:20240105103000Z", "2024-01-05T10:30:00Z"),
    ("D:20240105103000", "2024-01-05T10:30:00"), ("D:202401", "2024-01-01"), ("20240105", "2024-01-05"),
    ("D:20240105103000-05'30", "2024-01-05T10:30:00-05:30"), ("yesterday", None), ("", None),
])
def test_pdf_dates(raw: str, iso: str | None) -> None:
    assert pdf_date(raw) == iso


def doc_fields(filename: str, content: bytes) -> dict:
    return parsed_fields(parse(filename, content).metadata).get("doc", {})


def test_pdf_information_dictionary() -> None:
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "The quarterly report of the harbour office.")
    pdf.set_metadata({"title": "Quarterly report", "author": "Harbour office", "creationDate": "D:20240105103000Z",
                      "modDate": "D:20240201090000+01'00'"})
    assert doc_fields("report.pdf", pdf.tobytes()) == {
        "title": "Quarterly report", "author": "Harbour office", "created": "2024-01-05T10:30:00Z",
        "modified": "2024-02-01T09:00:00+01:00"}


def test_docx_and_pptx_core_properties() -> None:
    docx = DocxDocument()
    docx.add_paragraph("The lease of the Berlin office runs until March.")
    core = docx.core_properties
    core.title, core.author = "Office lease", "Legal team"
    core.created, core.modified = datetime(2023, 5, 1, 8, 0), datetime(2024, 6, 30, 17, 45)
    out = io.BytesIO()
    docx.save(out)
    assert doc_fields("lease.docx", out.getvalue()) == {
        "title": "Office lease", "author": "Legal team", "created": "2023-05-01T08:00:00+00:00",
        "modified": "2024-06-30T17:45:00+00:00"}
    import pptx

    deck = pptx.Presentation(io.BytesIO(make_pptx([{"title": "Roadmap", "body": ["Ship the metadata filters."]}])))
    deck.core_properties.title, deck.core_properties.author = "Roadmap 2025", "Product"
    deck.core_properties.created = datetime(2024, 12, 1, 9, 30)
    out = io.BytesIO()
    deck.save(out)
    fields = doc_fields("deck.pptx", out.getvalue())
    assert fields["title"] == "Roadmap 2025" and fields["author"] == "Product"
    assert fields["created"] == "2024-12-01T09:30:00+00:00"


def test_epub_package_metadata() -> None:
    book = make_epub([("One", "<h1>One</h1><p>The first chapter of the book.</p>")], title="The Tides")
    with zipfile.ZipFile(io.BytesIO(book)) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    entries["OEBPS/content.opf"] = entries["OEBPS/content.opf"].replace(
        b"</dc:title>", b"</dc:title><dc:creator>Ana Lee</dc:creator><dc:date>2021-09-14</dc:date>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    assert doc_fields("tides.epub", out.getvalue()) == {"title": "The Tides", "author": "Ana Lee",
                                                        "created": "2021-09-14"}


def test_odf_meta_xml() -> None:
    meta = ('<?xml version="1.0"?><office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
            ' xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            "<office:meta><dc:title>Minutes</dc:title><meta:initial-creator>Kim</meta:initial-creator>"
            "<dc:creator>Lee</dc:creator><meta:creation-date>2022-03-04T05:06:07</meta:creation-date>"
            "<dc:date>2022-03-05T10:00:00.123456789</dc:date></office:meta></office:document-meta>")
    odt = make_odf("text", "<text:p>The minutes of the board meeting.</text:p>", extra={"meta.xml": meta.encode()})
    fields = doc_fields("minutes.odt", odt)
    assert fields == {"title": "Minutes", "author": "Kim", "created": "2022-03-04T05:06:07",
                      "modified": "2022-03-05T10:00:00.123456789"}
    assert datetime(2022, 3, 4, 5, 6, 7, tzinfo=UTC).isoformat().startswith(fields["created"])

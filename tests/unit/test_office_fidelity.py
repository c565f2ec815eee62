"""Office files that real suites (Apache Tika's test documents) showed losing text or refused for
the wrong reason, each generated the way its writer makes it: EPUB 2's public NCX DOCTYPE, a DOCX with
an HTML alt-chunk, an ODT from OpenOffice 3 with a MathML object, Japanese ruby, Strict OOXML,
an encrypted ODT; declarations hidden in UTF-16 parts; a workbook padded with empty cells; an
image near the decode ceiling; DOCX and HTML chunks that cite where they are."""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from uuid import uuid4

import docx
import pymupdf
import pytest
from PIL import Image

from tests.unit.office_builders import LAUGHS, encrypted_odt, make_epub, make_odf, strict_xlsx
from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers import default_registry, png_bands
from ultimate_rag.adapters.parsers.assets import AssetGate
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.sheets import XlsxParser
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource, ParsedAsset, ParsedDocument

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NCX_DOCTYPE = ('<!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" '
               '"http://www.daisy.org/z3986/2005/ncx-2005-1.dtd">')


def parse(name: str, content: bytes, limits: ParseLimits | None = None) -> ParsedDocument:
    source = DocumentSource(None, name, "application/octet-stream", content)
    return default_registry(limits).resolve(source).parse(source)


def rewritten(content: bytes, changes: dict[str, bytes], edit: dict[str, tuple[bytes, bytes]] | None = None) -> bytes:
    """The package with parts replaced or added (``changes``) and text replaced in parts (``edit``)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(content)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = changes.pop(item.filename, None)
            if data is None:
                data = source.read(item)
                old, new = (edit or {}).get(item.filename, (b"", b""))
                data = data.replace(old, new, 1) if old else data
            target.writestr(item.filename, data)
        for name, data in changes.items():
            target.writestr(name, data)
    return out.getvalue()


def saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def body_xml(content: bytes, paragraphs: str) -> bytes:
    """A python-docx document whose body is ``paragraphs`` (WordprocessingML) before its sectPr."""
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        xml = archive.read("word/document.xml").decode()
    return re.sub(r"<w:body>.*?(<w:sectPr)", lambda m: f"<w:body>{paragraphs}{m.group(1)}", xml, flags=re.S).encode()


# -- DOCX ------------------------------------------------------------------------------------------

def test_ruby_keeps_the_base_text_in_place_and_the_reading_after_it() -> None:
    """Tika testWORD_phonetic.docx: とうきょう over 東京 (a w:ruby run) was lost, the file FAILED."""
    ruby = ('<w:p><w:r><w:ruby><w:rubyPr><w:rubyAlign w:val="distributeSpace"/><w:hps w:val="11"/>'
            '<w:hpsRaise w:val="20"/><w:hpsBaseText w:val="22"/><w:lid w:val="ja-JP"/></w:rubyPr>'
            '<w:rt><w:r><w:t>とうきょう</w:t></w:r></w:rt><w:rubyBase><w:r><w:t>東京</w:t></w:r></w:rubyBase>'
            '</w:ruby></w:r><w:r><w:t>都に行きます。</w:t></w:r></w:p>')
    base = saved(docx.Document())
    parsed = parse("phonetic.docx", rewritten(base, {"word/document.xml": body_xml(base, ruby)}))
    assert [b.text for b in parsed.blocks] == ["東京都に行きます。 (東京: とうきょう)"]


def alt_chunk_docx() -> bytes:
    """Like Tika testAltChunkHTML.docx: the body is one w:altChunk naming an HTML part that starts
    with <!DOCTYPE html>."""
    base = saved(docx.Document())
    html = (b"<!DOCTYPE html>\r\n<html><head><title>HTML import</title></head><body><p>Simple paragraph with a "
            b"<strong>emphasized</strong> word.</p><p>Example of a table:</p><table><tr><th>Col 1</th><th>Col 2</th>"
            b"</tr><tr><td>ROW 1</td><td>4,500</td></tr><tr><td>ROW 2</td><td>7,250</td></tr></table></body></html>")
    rel = (b'<Relationship Id="htmlDoc" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
           b'aFChunk" Target="htmlDoc.html"/></Relationships>')
    types = b'<Override PartName="/word/htmlDoc.html" ContentType="text/html"/></Types>'
    body = body_xml(base, '<w:p><w:r><w:t>Before the import.</w:t></w:r></w:p><w:altChunk r:id="htmlDoc"/>')
    return rewritten(base, {"word/document.xml": body, "word/htmlDoc.html": html},
                     {"word/_rels/document.xml.rels": (b"</Relationships>", rel),
                      "[Content_Types].xml": (b"</Types>", types)})


def test_an_html_alt_chunk_is_read_where_it_stands() -> None:
    parsed = parse("alt.docx", alt_chunk_docx())
    assert [(b.kind, b.text) for b in parsed.blocks] == [
        ("paragraph", "Before the import."), ("paragraph", "Simple paragraph with a emphasized word."),
        ("paragraph", "Example of a table:"),
        ("table", "| Col 1 | Col 2 |\n|---|---|\n| ROW 1 | 4,500 |\n| ROW 2 | 7,250 |")]
    table = parsed.blocks[-1]
    assert table.locator.paragraph_start == 2 and [r.row_start for r in table.rows] == [2, 3]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_declaration_in_a_utf16_part_is_refused(encoding: str) -> None:
    base = saved(docx.Document())
    with zipfile.ZipFile(io.BytesIO(base)) as archive:
        xml = archive.read("word/document.xml").decode()
    xml = xml.replace('encoding="UTF-8"', 'encoding="UTF-16"', 1)
    xml = re.sub(r"\?>", "?>" + LAUGHS, xml, count=1)
    with pytest.raises(InvalidDocumentError, match=r"word/document\.xml declares a DTD"):
        parse("utf16.docx", rewritten(base, {"word/document.xml": xml.encode(encoding)}))


def test_docx_chunks_cite_their_paragraphs_and_the_heading_bookmark() -> None:
    document = docx.Document()
    heading = document.add_heading("Night service", level=1)
    mark = heading._p.makeelement(f"{{{W}}}bookmarkStart", {f"{{{W}}}id": "1", f"{{{W}}}name": "_Toc001"})
    heading._p.insert(1, mark)
    for n in range(12):
        document.add_paragraph(f"Ferry {n} leaves the north pier at {n}:15 and calls at every island on the way.")
    parsed = parse("night.docx", saved(document))
    chunks = StructuredChunker(lambda text: len(text.split()) + 2).split(
        parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1, chunk_size=40, overlap=0)
    assert len(chunks) > 3
    assert all(c.locator.paragraph_start and c.locator.anchor == "_Toc001" for c in chunks)
    assert chunks[0].locator.paragraph_start == 1 and chunks[-1].locator.paragraph_end == 13


# -- HTML ------------------------------------------------------------------------------------------

def test_html_chunks_cite_the_anchor_above_them_and_their_paragraphs() -> None:
    page = (b"<html><body><h1 id='top'>Timetable</h1><p>Intro words here.</p><section id='winter'><h2>Winter</h2>"
            b"<p>Boats leave at nine.</p><table id='fares'><tr><th>Fare</th><th>EUR</th></tr><tr><td>Adult</td>"
            b"<td>4.50</td></tr></table></section></body></html>")
    blocks = parse("t.html", page).blocks
    assert [(b.text[:12], b.locator.anchor, b.locator.paragraph_start) for b in blocks] == [
        ("Timetable", "top", 1), ("Intro words ", "top", 2), ("Winter", "winter", 3),
        ("Boats leave ", "winter", 4), ("| Fare | EUR", "fares", 5)]
    assert [(r.table, r.row_start, r.anchor, r.paragraph_start) for r in blocks[-1].rows] == [(1, 2, "fares", 5)]


# -- EPUB and ODF ----------------------------------------------------------------------------------

def test_an_epub2_ncx_with_its_public_doctype_is_read() -> None:
    """Tika testEPUB.epub: every EPUB 2 NCX carries the NISO public DOCTYPE; the book was refused."""
    book = make_epub([("Chapter One", "<p>The ferry leaves at nine.</p>")])
    book = rewritten(book, {}, {"OEBPS/toc.ncx": (b"?>", b"?>" + NCX_DOCTYPE.encode())})
    parsed = parse("book.epub", book)
    assert [b.text for b in parsed.blocks][:2] == ["Chapter One", "The ferry leaves at nine."]
    assert parsed.blocks[1].locator.anchor == "OEBPS/text/ch1.xhtml"


@pytest.mark.parametrize(("part", "payload"), [
    ("OEBPS/toc.ncx", ('<?xml version="1.0"?>' + LAUGHS + '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"/>')
     .encode()),
    ("OEBPS/toc.ncx", b'<?xml version="1.0"?><!DOCTYPE ncx [<!ELEMENT ncx ANY>]><ncx/>'),
    ("OEBPS/text/ch1.xhtml", ('<?xml version="1.0" encoding="UTF-16"?>' + LAUGHS + "<html/>").encode("utf-16")),
])
def test_epub_declarations_are_refused_in_any_encoding(part: str, payload: bytes) -> None:
    book = rewritten(make_epub([("One", "<p>x</p>")]), {part: payload})
    with pytest.raises(InvalidDocumentError, match=re.escape(part) + " declares a DTD"):
        parse("bomb.epub", book)


def test_an_odt_from_openoffice_3_with_a_mathml_object_is_read() -> None:
    """Tika testODFwithOOo3.odt: the formula object's content.xml names OpenOffice's MathML DTD."""
    math = (b'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE math:math PUBLIC "-//OpenOffice.org//DTD Modified '
            b'W3C MathML 1.01//EN" "math.dtd"><math:math xmlns:math="http://www.w3.org/1998/Math/MathML">'
            b"<math:mi>A</math:mi></math:math>")
    odt = make_odf("text", "<text:p>This is a sample Open Office document, written in OpenOffice 3.</text:p>",
                   extra={"Object 2/content.xml": math})
    assert parse("ooo3.odt", odt).blocks[0].text.startswith("This is a sample Open Office document")


def test_an_encrypted_odt_says_it_is_encrypted() -> None:
    with pytest.raises(InvalidDocumentError, match="ODT document is encrypted with a password"):
        parse("secret.odt", encrypted_odt())


# -- spreadsheets ------------------------------------------------------------------------------------

def test_a_strict_ooxml_workbook_is_read() -> None:
    parsed = parse("strict.xlsx", strict_xlsx({"First Sheet": [["Test spreadsheet"], ["2nd row", "2nd row 2nd column"]],
                                              "Sheet Number 2": [["Sheet 2 row 1"], ["Sheet 2 row 2"], [], ["This one is red"]],
                                              "Sheet3": []}))
    text = parsed.text
    assert [b.text for b in parsed.blocks if b.kind == "heading"] == ["First Sheet", "Sheet Number 2"]  # Sheet3 is empty
    for words in ("Test spreadsheet", "2nd row 2nd column", "Sheet 2 row 2", "This one is red"):
        assert words in text, text


def test_empty_formatted_cells_do_not_count_toward_the_cell_limit() -> None:
    import xlsxwriter

    out = io.BytesIO()
    book = xlsxwriter.Workbook(out, {"in_memory": True})
    sheet, bold = book.add_worksheet("S"), book.add_format({"bold": True})
    for r, row in enumerate([["Item", "Count"], ["Rope", 12], ["Flares", 40]]):
        sheet.write_row(r, 0, row)
        for c in range(2, 60):
            sheet.write_blank(r, c, None, bold)  # Excel writes formatted empty cells like these
    book.close()
    parsed = XlsxParser(ParseLimits(max_cells=20)).parse(DocumentSource(None, "s.xlsx", "x", out.getvalue()))
    assert parsed.metadata["cells"] == 6
    with pytest.raises(InvalidDocumentError, match="more than 5 cells"):
        XlsxParser(ParseLimits(max_cells=5)).parse(DocumentSource(None, "s.xlsx", "x", out.getvalue()))


# -- images ----------------------------------------------------------------------------------------

def striped_png(size: tuple[int, int], mode: str = "RGB") -> bytes:
    image = Image.new(mode, size, "white")
    for y in range(0, size[1], 40):
        image.paste("navy" if mode != "L" else 40, (0, y, size[0], y + 8))
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    return out.getvalue()


def test_an_image_near_four_times_the_pixel_limit_is_downscaled() -> None:
    limits = ParseLimits(max_image_pixels=1_000_000)
    gate = AssetGate(limits)
    asset = gate.admit(ParsedAsset("k", striped_png((1980, 1980)), "image/png"), "the image")  # 3.9× the limit
    assert asset is not None and asset.mime_type == "image/png"
    with Image.open(io.BytesIO(asset.data)) as image:
        assert image.size == (990, 990) and image.getpixel((5, 1)) != image.getpixel((5, 10))
    assert gate.warnings == ["the image was downscaled to 990×990 pixels to fit the limits of 1000000 pixels and "
                             "32.0 MB per image"]


def test_a_large_png_is_never_decoded_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Band by band: Pillow's bomb check (as an error) stops any decode larger than a few bands."""
    data = striped_png((1200, 1000))
    with Image.open(io.BytesIO(data)) as image:
        expected = image.reduce(4).tobytes()
    monkeypatch.setattr(png_bands, "BAND_BYTES", 1200 * 3 * 50)  # 50 rows a band
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 200_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        reduced = png_bands.reduced_png(data, 4)
        with pytest.raises((Image.DecompressionBombError, Image.DecompressionBombWarning)):
            Image.open(io.BytesIO(data))  # the check that held for every band
    assert reduced is not None and reduced.size == (300, 250) and reduced.tobytes() == expected


# -- PDF: the no-text message -----------------------------------------------------------------------

def test_a_blank_pdf_is_called_blank_not_scanned() -> None:
    doc = pymupdf.open()
    doc.new_page()
    with pytest.raises(InvalidDocumentError, match="its pages are blank"):
        PdfParser().parse(DocumentSource(None, "blank.pdf", "x", doc.tobytes()))


def test_the_new_locator_fields_survive_storage_and_read_in_citations() -> None:
    from ultimate_rag.client.models import Citation
    from ultimate_rag.domain.models import SourceLocator

    locator = SourceLocator(table=2, row_start=4, row_end=9, paragraph_start=12, paragraph_end=15, anchor="night")
    stored = locator.to_metadata()
    assert stored == {"table": 2, "row_start": 4, "row_end": 9, "paragraph_start": 12, "paragraph_end": 15,
                      "anchor": "night"}
    assert SourceLocator.from_metadata(stored) == locator
    assert str(Citation("d", "report.docx", ["Fares"], stored)) == "report.docx · Fares · table 2 · rows 4-9 · #night"
    prose = {"paragraph_start": 12, "paragraph_end": 15, "anchor": "OEBPS/ch1.xhtml#night"}
    assert str(Citation("d", "book.epub", [], prose)) == "book.epub · paragraphs 12-15 · OEBPS/ch1.xhtml#night"

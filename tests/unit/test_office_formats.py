"""PPTX, XLSX, EPUB and OpenDocument: real files (python-pptx's test decks, py-pdf's ODT) and
files generated with python-pptx, XlsxWriter and zip + XML; their structure and locators; detection
by content (inner parts), lying extensions, and the hostile packages each must refuse readably."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from uuid import uuid4

import pytest

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.detect import detect_kind
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.slides import NOTES_PREFIX
from ultimate_rag.domain.errors import InvalidDocumentError, UnsupportedFormatError
from ultimate_rag.domain.models import DocumentSource

from .office_builders import LAUGHS, make_epub, make_odf, make_pptx, make_xlsx, package
from .test_format_parsers import png

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def source(name: str, data: bytes) -> DocumentSource:
    return DocumentSource(None, name, "application/octet-stream", data)


def parse(name: str, data: bytes, limits: ParseLimits | None = None):
    src = source(name, data)
    return default_registry(limits).resolve(src).parse(src)


def chunk(parsed, size: int = 256):
    return StructuredChunker(lambda text: max(1, len(text) // 3)).split(
        parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1, chunk_size=size, overlap=0)


def with_part(data: bytes, name: str, content: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    entries[name] = content
    return package(entries)


# -- PPTX --------------------------------------------------------------------------------------

def test_python_pptx_test_decks_give_a_heading_per_slide_and_their_pictures() -> None:
    parsed = parse("deck.pptx", (CORPUS / "pptx/ph-populated-placeholders.pptx").read_bytes())
    headings = [b for b in parsed.blocks if b.kind == "heading"]
    assert [b.locator.page for b in headings] == list(range(1, parsed.metadata["page_count"] + 1))
    assert "Title Text" in [b.text for b in headings]
    assert {a.locator_key: a.page for a in parsed.assets} == {"slide-1/shape-3": 1, "slide-2/shape-3": 2}
    assert all(a.mime_type == "image/png" for a in parsed.assets)
    minimal = parse("minimal.pptx", (CORPUS / "pptx/minimal.pptx").read_bytes())
    assert minimal.metadata["page_count"] == 0 and minimal.blocks == ()


def test_pptx_titles_text_tables_pictures_and_speaker_notes_cite_their_slide() -> None:
    data = make_pptx([
        {"title": "Quarterly review", "body": ["Revenue grew in the north"], "notes": "Mention the heron budget"},
        {"title": "Ferry schedule", "table": [["Pier", "Departs"], ["Four", "09:20"]],
         "picture": png(64, 48), "alt": "Map of the piers", "notes": "Ask Lena about the 09:20 ferry delay"},
    ])
    parsed = parse("review.pptx", data)
    got = [(b.kind, b.locator.page, b.text) for b in parsed.blocks]
    assert got == [
        ("heading", 1, "Quarterly review"), ("paragraph", 1, "Revenue grew in the north"),
        ("paragraph", 1, f"{NOTES_PREFIX} Mention the heron budget"),
        ("heading", 2, "Ferry schedule"), ("table", 2, "| Pier | Departs |\n|---|---|\n| Four | 09:20 |"),
        ("figure", 2, "[Image on page 2: Map of the piers]"),
        ("paragraph", 2, f"{NOTES_PREFIX} Ask Lena about the 09:20 ferry delay")]
    note = next(c for c in chunk(parsed, 24) if "Lena" in c.content)
    assert note.locator.page == 2 and note.heading_path == ("Ferry schedule",)


def test_pptx_hostile_packages_fail_readably() -> None:
    deck = make_pptx([{"title": "x"}])
    with pytest.raises(InvalidDocumentError, match=r"PPTX part ppt/presentation\.xml declares a DTD"):
        parse("lol.pptx", with_part(deck, "ppt/presentation.xml", LAUGHS.encode() + b"<p/>"))
    bomb = with_part(deck, "ppt/slides/slide1.xml", b"\0" * (3 * 1024 * 1024))
    with pytest.raises(InvalidDocumentError, match=r"PPTX archive unpacks to .*zip bomb"):
        parse("bomb.pptx", bomb, ParseLimits(max_archive_bytes=1024 * 1024))


# -- XLSX --------------------------------------------------------------------------------------

def test_xlsx_sheets_are_sections_with_rows_and_cached_formula_values() -> None:
    data = make_xlsx({"Budget 2026": [["Item", "Amount"], ["Heron feed", 12.5], [], ["Nets", 30]],
                      "Staff": [["Name", "Room"], ["Lena Vogt", "B-117"]]},
                     formulas={"Budget 2026": ("B6", "=SUM(B2:B4)", 42.5)})
    parsed = parse("budget.xlsx", data)
    kinds = [(b.kind, b.text.split("\n")[0]) for b in parsed.blocks]
    assert kinds == [("heading", "Budget 2026"), ("table", "| Item | Amount |"),
                     ("heading", "Staff"), ("table", "| Name | Room |")]
    table = parsed.blocks[1]
    assert "| Heron feed | 12.5 |" in table.text and "|  | 42.5 |" in table.text  # the formula's cached value
    assert [(r.row_start, r.row_end) for r in table.rows] == [(2, 2), (4, 4), (6, 6)]  # the sheet's row numbers
    cited = next(c for c in chunk(parsed) if "B-117" in c.content)
    assert cited.heading_path == ("Staff",) and (cited.locator.row_start, cited.locator.row_end) == (2, 2)


def test_xlsx_limits_on_sheets_cells_archive_and_dtds() -> None:
    data = make_xlsx({f"S{i}": [["a", "b"], ["c", "d"]] for i in range(4)})
    with pytest.raises(InvalidDocumentError, match="4 sheets, more than the limit of 3"):
        parse("many.xlsx", data, ParseLimits(max_sheets=3))
    with pytest.raises(InvalidDocumentError, match="more than 10 cells, the limit"):
        parse("cells.xlsx", data, ParseLimits(max_cells=10))
    with pytest.raises(InvalidDocumentError, match=r"XLSX part xl/workbook\.xml declares a DTD"):
        parse("lol.xlsx", with_part(data, "xl/workbook.xml", LAUGHS.encode() + b"<workbook/>"))
    with pytest.raises(InvalidDocumentError, match=r"XLSX archive has \d+ entries, more than the limit of 5"):
        parse("entries.xlsx", data, ParseLimits(max_archive_entries=5))


def test_xlsx_claiming_a_huge_dimension_yields_only_its_cells() -> None:
    data = make_xlsx({"Data": [["k", "v"], ["a", 1]]})
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        sheet = archive.read("xl/worksheets/sheet1.xml")
    lying = sheet.replace(b'<dimension ref="A1:B2"/>', b'<dimension ref="A1:XFD1048576"/>')
    assert lying != sheet
    parsed = parse("lying.xlsx", with_part(data, "xl/worksheets/sheet1.xml", lying), ParseLimits(max_cells=100))
    assert parsed.blocks[1].text == "| k | v |\n|---|---|\n| a | 1 |"


# -- EPUB --------------------------------------------------------------------------------------

def test_epub_chapters_headings_toc_titles_and_images() -> None:
    data = make_epub([
        ("Chapter One", "<h1>The Harbour</h1><p>The ferry leaves from pier four.</p><h2>Tickets</h2>"
                        "<p>Sold on board.</p><p><img src=\"../images/map.png\" alt=\"Map of the piers\"/></p>"),
        ("Chapter Two: The Lighthouse", "<p>A chapter whose file has no heading of its own.</p>"),
    ], images={"map.png": png(40, 30)})
    parsed = parse("book.epub", data)
    assert parsed.metadata["title"] == "A Test Book" and parsed.metadata["chapters"] == 2
    assert [(b.kind, b.level, b.text) for b in parsed.blocks] == [
        ("heading", 1, "The Harbour"), ("paragraph", 0, "The ferry leaves from pier four."),
        ("heading", 2, "Tickets"), ("paragraph", 0, "Sold on board."),
        ("figure", 0, "[Image: Map of the piers]"),
        ("heading", 1, "Chapter Two: The Lighthouse"), ("paragraph", 0, "A chapter whose file has no heading of its own.")]
    assert [(a.locator_key, a.mime_type) for a in parsed.assets] == [("part-OEBPS/images/map.png", "image/png")]
    assert chunk(parsed)[-1].heading_path == ("Chapter Two: The Lighthouse",)


def test_epub_entities_and_bombs_are_refused() -> None:
    evil = make_epub([("One", "<p>x</p>")])
    laughs = ('<?xml version="1.0"?>' + LAUGHS + '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>&lol3;</p>'
              "</body></html>").encode()
    with pytest.raises(InvalidDocumentError, match=r"EPUB part OEBPS/text/ch1\.xhtml declares a DTD"):
        parse("lol.epub", with_part(evil, "OEBPS/text/ch1.xhtml", laughs))
    with pytest.raises(InvalidDocumentError, match="EPUB archive unpacks to"):
        parse("bomb.epub", with_part(evil, "OEBPS/pad.bin", b"\0" * (3 * 1024 * 1024)),
              ParseLimits(max_archive_bytes=1024 * 1024))
    opf_name = "OEBPS/content.opf"
    with zipfile.ZipFile(io.BytesIO(evil)) as archive:
        opf = archive.read(opf_name)
    repeated = opf.replace(b'<itemref idref="ch1"/>', b'<itemref idref="ch1"/>' * 5000)
    assert parse("loop.epub", with_part(evil, opf_name, repeated)).metadata["chapters"] == 1
    no_opf = package({"mimetype": b"application/epub+zip", "META-INF/container.xml": b"<container/>"})
    with pytest.raises(InvalidDocumentError, match="names no package document"):
        parse("empty.epub", no_opf)


# -- OpenDocument ------------------------------------------------------------------------------

def test_odt_headings_paragraphs_lists_tables_and_the_real_file() -> None:
    body = ('<text:h text:outline-level="1">Harbour guide</text:h><text:p>The ferry<text:s text:c="2"/>leaves.</text:p>'
            '<text:h text:outline-level="2">Piers</text:h><text:list><text:list-item><text:p>Pier four</text:p>'
            "</text:list-item><text:list-item><text:p>Pier five</text:p></text:list-item></text:list>"
            "<table:table><table:table-row><table:table-cell><text:p>Pier</text:p></table:table-cell>"
            "<table:table-cell><text:p>Opens</text:p></table:table-cell></table:table-row><table:table-row>"
            "<table:table-cell><text:p>Four</text:p></table:table-cell><table:table-cell><text:p>06:00</text:p>"
            "</table:table-cell></table:table-row></table:table>")
    parsed = parse("guide.odt", make_odf("text", body))
    assert [(b.kind, b.level, b.text) for b in parsed.blocks] == [
        ("heading", 1, "Harbour guide"), ("paragraph", 0, "The ferry leaves."), ("heading", 2, "Piers"),
        ("list", 0, "- Pier four\n- Pier five"), ("table", 0, "| Pier | Opens |\n|---|---|\n| Four | 06:00 |")]
    framed = ('<text:p>Before the logo<draw:frame><draw:image xlink:href="Pictures/logo.png"/><svg:desc>Harbour logo'
              '</svg:desc></draw:frame></text:p><text:p><draw:frame><draw:text-box><text:p>Boxed opening hours</text:p>'
              "</draw:text-box></draw:frame></text:p>")
    parsed = parse("framed.odt", make_odf("text", framed, extra={"Pictures/logo.png": png(30, 20)}))
    assert [(b.kind, b.text) for b in parsed.blocks] == [
        ("paragraph", "Before the logo"), ("figure", "[Image: Harbour logo]"), ("paragraph", "Boxed opening hours")]
    assert [a.locator_key for a in parsed.assets] == ["part-Pictures/logo.png"]
    real = parse("source.odt", (CORPUS / "odt/source.odt").read_bytes())
    assert real.blocks[0].text.startswith("Lorem ipsum dolor sit amet")


def test_ods_sheets_rows_and_repeated_cells_are_bounded() -> None:
    row = '<table:table-row>{}</table:table-row>'
    cell = '<table:table-cell{}><text:p>{}</text:p></table:table-cell>'
    sheet = ('<table:table table:name="Rota">' + row.format(cell.format("", "Day") + cell.format("", "Who"))
             + '<table:table-row table:number-rows-repeated="3"><table:table-cell/></table:table-row>'
             + row.format(cell.format("", "Monday") + cell.format("", "Lena")) + "</table:table>")
    parsed = parse("rota.ods", make_odf("spreadsheet", sheet))
    assert parsed.blocks[0].text == "Rota" and parsed.blocks[1].text == "| Day | Who |\n|---|---|\n| Monday | Lena |"
    assert [(r.row_start, r.row_end) for r in parsed.blocks[1].rows] == [(5, 5)]
    bomb = ('<table:table table:name="B"><table:table-row table:number-rows-repeated="1000000">'
            + cell.format(' table:number-columns-repeated="16384"', "x") + "</table:table-row></table:table>")
    with pytest.raises(InvalidDocumentError, match="more than 5000000 cells, the limit"):
        parse("bomb.ods", make_odf("spreadsheet", bomb))


def test_odp_slides_titles_text_and_notes() -> None:
    frame = '<draw:frame{}><draw:text-box><text:p>{}</text:p></draw:text-box></draw:frame>'
    slide = ('<draw:page draw:name="p1">' + frame.format(' presentation:class="title"', "Safety briefing")
             + frame.format("", "Life jackets are under the seats")
             + "<presentation:notes>" + frame.format("", "Point at the exits") + "</presentation:notes></draw:page>")
    parsed = parse("talk.odp", make_odf("presentation", slide))
    assert [(b.kind, b.locator.page, b.text) for b in parsed.blocks] == [
        ("heading", 1, "Safety briefing"), ("paragraph", 1, "Life jackets are under the seats"),
        ("paragraph", 1, f"{NOTES_PREFIX} Point at the exits")]


def test_odf_with_a_dtd_is_refused() -> None:
    with pytest.raises(InvalidDocumentError, match=r"ODT part content\.xml declares a DTD"):
        parse("lol.odt", make_odf("text", "<text:p>&lol3;</text:p>", prolog=LAUGHS))


# -- detection -------------------------------------------------------------------------------

def test_each_format_is_detected_by_its_content_and_a_lying_extension_is_refused() -> None:
    files = {".pptx": make_pptx([{"title": "t"}]), ".xlsx": make_xlsx({"S": [["a"]]}),
             ".epub": make_epub([("One", "<p>x</p>")]), ".odt": make_odf("text", "<text:p>x</text:p>"),
             ".ods": make_odf("spreadsheet", ""), ".odp": make_odf("presentation", "")}
    kinds = {ext: detect_kind(data, ext) for ext, data in files.items()}
    assert kinds == {".pptx": "binary:application/vnd.openxmlformats-officedocument.presentationml.presentation",
                     ".xlsx": "binary:application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                     ".epub": "binary:application/epub+zip",
                     ".odt": "binary:application/vnd.oasis.opendocument.text",
                     ".ods": "binary:application/vnd.oasis.opendocument.spreadsheet",
                     ".odp": "binary:application/vnd.oasis.opendocument.presentation"}
    registry = default_registry()
    for ext, data in files.items():
        registry.resolve(source(f"file{ext}", data))  # accepted under its own name
        other = ".xlsx" if ext != ".xlsx" else ".pptx"
        with pytest.raises(UnsupportedFormatError):
            registry.resolve(source(f"file{other}", data))
    assert {".pptx", ".xlsx", ".epub", ".odt", ".ods", ".odp"} <= set(registry.supported_extensions)


def test_a_zip_whose_first_entry_hides_its_type_is_detected_by_its_main_part() -> None:
    """The signature check reads only the first entry; the inner parts decide."""
    with zipfile.ZipFile(io.BytesIO(make_pptx([{"title": "Hidden deck"}]))) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    reordered = package({"docProps/app.xml": entries.pop("docProps/app.xml"), **entries})
    assert detect_kind(reordered, ".pptx").endswith("presentationml.presentation")
    assert parse("hidden.pptx", reordered).blocks[0].text == "Hidden deck"

"""PDF, DOCX, HTML and CSV parsers against real files built here with real libraries (PyMuPDF
writes the PDFs, python-docx the DOCX files), plus the hostile inputs each parser must refuse
with a readable reason. The builders are reused by the integration tests."""

from __future__ import annotations

import asyncio
import io
import zipfile

import pymupdf
import pytest

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.docx import DocxParser
from ultimate_rag.adapters.parsers.html import HtmlParser
from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.adapters.parsers.tabular import CsvParser
from ultimate_rag.domain.errors import InvalidDocumentError, UnsupportedFormatError
from ultimate_rag.domain.models import DocumentSource
from ultimate_rag.testing.eventually import eventually, eventually_sync

ENGLISH = "The harbour ferry leaves every twenty minutes from pier four."
CHINESE = "港口渡轮每二十分钟从四号码头出发。"
KOREAN = "항구 페리는 4번 부두에서 20분마다 출발합니다."


# -- builders --------------------------------------------------------------------------------

def png(width: int = 32, height: int = 24, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, width, height), False)
    pix.set_rect(pix.irect, rgb)
    return pix.tobytes("png")


def jpeg(width: int = 40, height: int = 30) -> bytes:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, width, height), False)
    pix.set_rect(pix.irect, (20, 120, 220))
    return pix.tobytes("jpeg")


def make_pdf(*, image: bytes | None = None, extra_pages: int = 0, two_columns: bool = False) -> bytes:
    """Page 1: a heading, English, Chinese and Korean text, an image with a caption. Page 2: a
    second heading and text (in two columns when asked). Then ``extra_pages`` filler pages."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Ferry Timetable", fontsize=22)
    page.insert_text((72, 110), ENGLISH, fontsize=11)
    page.insert_text((72, 130), CHINESE, fontname="china-s", fontsize=11)
    page.insert_text((72, 150), KOREAN, fontname="korea", fontsize=11)
    if image is not None:
        page.insert_image(pymupdf.Rect(72, 180, 232, 300), stream=image)
        page.insert_text((72, 316), "Figure 1: Map of the harbour piers", fontsize=9)
    page = doc.new_page()
    page.insert_text((72, 72), "Night Service", fontsize=16)
    if two_columns:
        for i in range(3):
            page.insert_text((72, 110 + 40 * i), f"Left column paragraph {i}.", fontsize=11)
            page.insert_text((320, 110 + 40 * i), f"Right column paragraph {i}.", fontsize=11)
    else:
        page.insert_text((72, 110), "The last ferry departs at midnight from pier two.", fontsize=11)
    for n in range(extra_pages):
        page = doc.new_page()
        page.insert_text((72, 72), f"Filler page {n + 3} with a sentence about schedules.", fontsize=11)
    return doc.tobytes()


def huge_image_pdf(side: int = 40_000) -> bytes:
    """A small file that declares a side × side image (a decompression bomb): a tiny image is
    inserted, then its dictionary is edited to claim the huge size."""
    doc = pymupdf.open(stream=make_pdf(image=png()), filetype="pdf")
    xref = doc[0].get_images(full=True)[0][0]
    doc.xref_set_key(xref, "Width", str(side))
    doc.xref_set_key(xref, "Height", str(side))
    return doc.tobytes()


def make_docx(image: bytes | None = None, *, alt: str = "A red square logo") -> bytes:
    import docx
    from docx.shared import Inches

    document = docx.Document()
    document.add_heading("Operations Manual", level=1)
    document.add_paragraph("This manual covers the ferry operations.")
    document.add_heading("Schedules", level=2)
    document.add_paragraph(ENGLISH)
    table = document.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Pier", "Departure"), ("Four", "06:00"), ("Two", "23:59")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    document.add_paragraph("Text after the table.")
    if image is not None:
        document.add_picture(io.BytesIO(image), width=Inches(1))
        shape = document.inline_shapes[-1]
        shape._inline.docPr.set("descr", alt)
        document.add_paragraph("Figure 2: The company logo", style="Caption")
    document.add_heading("Safety", level=2)
    document.add_paragraph(CHINESE)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


HTML_PAGE = """<!doctype html><html><head><title>Ferry news</title><script>var x = "tracking";</script>
<style>p {color: red}</style></head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<header><p>Site banner text</p></header>
<main><article><h1>Harbour update</h1><p>The <b>new pier</b> opens in May.</p>
<h2>Timetable</h2><table><tr><th>Pier</th><th>Time</th></tr><tr><td>Four</td><td>06:00</td></tr></table>
<p><img src="map.png" alt="Map of the new pier"></p>
<h2>Contacts</h2><ul><li>Harbour office</li><li>Ticket desk</li></ul></article></main>
<aside>Related links</aside><footer>Copyright footer</footer></body></html>"""


def source(filename: str, content: bytes) -> DocumentSource:
    return DocumentSource(None, filename, "application/octet-stream", content)


def parse(filename: str, content: bytes, limits: ParseLimits | None = None):
    registry = default_registry(limits)
    src = source(filename, content)
    return registry.resolve(src).parse(src)


# -- PDF -------------------------------------------------------------------------------------

def test_pdf_text_pages_headings_and_cjk() -> None:
    parsed = parse("timetable.pdf", make_pdf())
    headings = [(b.text, b.level, b.locator.page) for b in parsed.blocks if b.kind == "heading"]
    assert headings == [("Ferry Timetable", 1, 1), ("Night Service", 2, 2)]
    texts = {b.text: b.locator.page for b in parsed.blocks if b.kind == "paragraph"}
    assert texts[ENGLISH] == 1 and texts[CHINESE] == 1 and texts[KOREAN] == 1
    assert texts["The last ferry departs at midnight from pier two."] == 2
    assert parsed.metadata["page_count"] == 2


def test_pdf_image_is_an_asset_with_page_caption_and_original_bytes() -> None:
    picture = jpeg()
    parsed = parse("timetable.pdf", make_pdf(image=picture))
    assert len(parsed.assets) == 1
    asset = parsed.assets[0]
    assert asset.data == picture  # JPEG streams are stored as they are: the original bytes
    assert asset.mime_type == "image/jpeg" and asset.page == 1
    assert asset.description == "Figure 1: Map of the harbour piers"
    figure = next(b for b in parsed.blocks if b.kind == "figure")
    assert figure.asset_ids == (asset.locator_key,) and figure.locator.page == 1
    assert figure.text == "[Image on page 1: Figure 1: Map of the harbour piers]"


def test_pdf_png_image_keeps_its_pixels() -> None:
    picture = png()
    asset = parse("timetable.pdf", make_pdf(image=picture)).assets[0]
    assert asset.mime_type == "image/png"
    original, extracted = pymupdf.Pixmap(picture), pymupdf.Pixmap(asset.data)
    assert (extracted.width, extracted.height) == (original.width, original.height)
    assert extracted.samples == original.samples


def test_pdf_two_columns_read_column_by_column() -> None:
    parsed = parse("columns.pdf", make_pdf(two_columns=True))
    order = [b.text for b in parsed.blocks if "column paragraph" in b.text]
    assert order == [f"Left column paragraph {i}." for i in range(3)] + [
        f"Right column paragraph {i}." for i in range(3)]


def test_pdf_chunks_carry_page_numbers_and_asset_keys() -> None:
    from uuid import uuid4

    parsed = parse("timetable.pdf", make_pdf(image=png()))
    chunker = StructuredChunker(lambda text: max(1, len(text) // 3))
    chunks = chunker.split(parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1,
                           chunk_size=256, overlap=0)
    assert {c.locator.page for c in chunks} == {1, 2}
    with_image = [c for c in chunks if c.metadata.get("asset_keys")]
    assert len(with_image) == 1 and "Figure 1" in with_image[0].content
    assert with_image[0].metadata["asset_keys"] == [parsed.assets[0].locator_key]


def test_pdf_encrypted_with_empty_user_password_opens_and_others_fail() -> None:
    doc = pymupdf.open(stream=make_pdf(), filetype="pdf")
    owner_only = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="")  # type: ignore[attr-defined]  # PyMuPDF's constants are untyped
    assert parse("locked.pdf", owner_only).metadata["page_count"] == 2
    locked = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="secret")  # type: ignore[attr-defined]  # PyMuPDF's constants are untyped
    with pytest.raises(InvalidDocumentError, match="encrypted with a password"):
        parse("locked.pdf", locked)


def test_pdf_corrupt_and_truncated() -> None:
    data = make_pdf()
    with pytest.raises(InvalidDocumentError, match="corrupt or truncated"):
        PdfParser().parse(source("broken.pdf", b"%PDF-1.7\n1 0 obj\n<< garbage >>\n" + bytes(range(256)) * 8))
    # A truncated file either opens what MuPDF can repair, or fails with the same reason.
    try:
        parsed = PdfParser().parse(source("cut.pdf", data[: len(data) // 3]))
    except InvalidDocumentError as exc:
        assert "corrupt or truncated" in exc.message or "no extractable text" in exc.message
    else:
        assert parsed.metadata["page_count"] >= 1


def test_pdf_page_limit_fails_and_huge_images_do_not() -> None:
    with pytest.raises(InvalidDocumentError, match="has 12 pages, more than the limit of 10"):
        parse("long.pdf", make_pdf(extra_pages=10), ParseLimits(max_pages=10))
    # one image over the pixel limit is downscaled; the document and its text carry on
    parsed = parse("big.pdf", make_pdf(image=png(1200, 900)), ParseLimits(max_image_pixels=1_000_000))
    assert ENGLISH in parsed.text and len(parsed.assets) == 1
    shrunk = pymupdf.Pixmap(parsed.assets[0].data)
    assert shrunk.width * shrunk.height <= 1_000_000 and shrunk.width < 1200
    assert parsed.metadata["warnings"] == [
        f"an image on page 1 (1200×900 pixels) was downscaled to {shrunk.width}×{shrunk.height} pixels to fit "
        "the limits of 1000000 pixels and 32.0 MB per image"]
    # a decompression bomb (a tiny stream claiming 40000×40000) is left out without being decoded
    parsed = parse("bomb.pdf", huge_image_pdf())
    assert ENGLISH in parsed.text and parsed.assets == ()
    assert parsed.metadata["warnings"] == [
        "an image on page 1 (40000×40000 pixels) was left out: it is 40000×40000 pixels, too large to "
        "downscale (more than 4 times the limit of 100000000 pixels)"]


def test_pdf_with_a_lying_extension_is_refused() -> None:
    with pytest.raises(UnsupportedFormatError, match="application/pdf"):
        default_registry().resolve(source("notes.txt", make_pdf()))


# -- DOCX ------------------------------------------------------------------------------------

def test_docx_headings_table_and_image_in_order() -> None:
    picture = png()
    parsed = parse("manual.docx", make_docx(picture))
    kinds = [(b.kind, b.text[:20]) for b in parsed.blocks]
    assert kinds[:4] == [("heading", "Operations Manual"), ("paragraph", "This manual covers t"),
                         ("heading", "Schedules"), ("paragraph", ENGLISH[:20])]
    table = next(b for b in parsed.blocks if b.kind == "table")
    assert table.text == "| Pier | Departure |\n|---|---|\n| Four | 06:00 |\n| Two | 23:59 |"
    assert [b.kind for b in parsed.blocks].index("table") < [b.text for b in parsed.blocks].index(
        "Text after the table.")
    assert len(parsed.assets) == 1 and parsed.assets[0].data == picture
    assert parsed.assets[0].mime_type == "image/png" and parsed.assets[0].description == "A red square logo"
    figure = next(b for b in parsed.blocks if b.kind == "figure")
    assert figure.text == "[Image: A red square logo]"
    chunks = StructuredChunker(lambda text: max(1, len(text) // 3)).split(
        parsed, document_id=__import__("uuid").uuid4(), knowledge_base_id=__import__("uuid").uuid4(),
        revision=1, chunk_size=256, overlap=0)
    paths = {c.heading_path for c in chunks}
    assert ("Operations Manual", "Schedules") in paths and ("Operations Manual", "Safety") in paths
    assert any("| Four | 06:00 |" in c.content and "| Pier | Departure |" in c.content for c in chunks)


def test_docx_caption_describes_an_image_without_alt_text() -> None:
    parsed = parse("manual.docx", make_docx(png(), alt=""))
    assert parsed.assets[0].description == "Figure 2: The company logo"


def _zip(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_docx_zip_bomb_is_refused_before_inflating() -> None:
    bomb = _zip({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"\0" * (20 * 1024 * 1024)})
    assert len(bomb) < 100_000
    with pytest.raises(InvalidDocumentError, match=r"unpacks to .* more than the limit of 1048576 .*zip bomb"):
        DocxParser(ParseLimits(max_archive_bytes=1024 * 1024)).parse(source("bomb.docx", bomb))
    many = _zip({f"word/media/{i}.bin": b"x" for i in range(50)})
    with pytest.raises(InvalidDocumentError, match=r"50 entries, more than the limit of 20"):
        DocxParser(ParseLimits(max_archive_entries=20)).parse(source("many.docx", many))


def test_docx_xml_entity_expansion_is_refused() -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
              b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
              b"<w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>")
    real = zipfile.ZipFile(io.BytesIO(make_docx()))
    entries = {name: real.read(name) for name in real.namelist()}
    entries["word/document.xml"] = laughs
    with pytest.raises(InvalidDocumentError, match=r"word/document\.xml declares a DTD .*entity expansion"):
        parse("laughs.docx", _zip(entries))


def test_docx_that_is_not_a_zip_fails_readably() -> None:
    with pytest.raises(InvalidDocumentError, match="not a readable DOCX"):
        DocxParser().parse(source("fake.docx", b"PK\x03\x04" + bytes(100)))


# -- HTML ------------------------------------------------------------------------------------

def test_html_main_content_headings_tables_and_alt_text() -> None:
    parsed = parse("news.html", HTML_PAGE.encode())
    text = parsed.text
    for noise in ("tracking", "color", "Home", "About us", "Site banner", "Related links", "Copyright"):
        assert noise not in text
    assert [(b.text, b.level) for b in parsed.blocks if b.kind == "heading"] == [
        ("Harbour update", 1), ("Timetable", 2), ("Contacts", 2)]
    assert "The new pier opens in May." in text
    assert "| Pier | Time |\n|---|---|\n| Four | 06:00 |" in text
    assert "[Image: Map of the new pier]" in text
    assert "- Harbour office\n- Ticket desk" in text
    assert parsed.metadata["title"] == "Ferry news"


def test_html_data_uri_image_becomes_an_asset() -> None:
    import base64

    picture = png()
    page = f'<html><body><p>Logo:</p><img alt="Logo" src="data:image/png;base64,{base64.b64encode(picture).decode()}"></body></html>'
    parsed = parse("logo.htm", page.encode())
    assert parsed.assets[0].data == picture and parsed.assets[0].description == "Logo"


def test_html_deep_nesting_fails_with_a_reason() -> None:
    page = "<html><body>" + "<div>" * 5000 + "deep" + "</div>" * 5000 + "</body></html>"
    with pytest.raises(InvalidDocumentError, match=r"nested \d+ elements deep, more than the limit of 200"):
        HtmlParser().parse(source("deep.html", page.encode()))


def test_html_entities_are_not_expanded() -> None:
    page = b'<!DOCTYPE html [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><html><body><p>&b;</p></body></html>'
    parsed = HtmlParser().parse(source("ent.html", page))
    assert "aaaaaaaaaa" not in parsed.text


# -- CSV / TSV -------------------------------------------------------------------------------

def test_csv_chunks_repeat_the_header() -> None:
    from uuid import uuid4

    rows = "\n".join(f"{i},Pier {i % 5},Departure at {i:02d}:00 from the harbour" for i in range(200))
    parsed = parse("times.csv", ("id,pier,note\n" + rows + "\n").encode())
    assert parsed.metadata["rows"] == 200 and parsed.metadata["columns"] == ["id", "pier", "note"]
    chunks = StructuredChunker(lambda text: max(1, len(text) // 3)).split(
        parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1, chunk_size=128, overlap=0)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.content.startswith("| id | pier | note |\n|---|---|---|\n")


def test_tsv_and_semicolon_csv() -> None:
    parsed = CsvParser().parse(source("t.tsv", b"a\tb\n1\t2\n"))
    assert parsed.blocks[0].text == "| a | b |\n|---|---|\n| 1 | 2 |"
    parsed = parse("s.csv", b"name;city\nAnna;Oslo\nBo;Lund\n")
    assert "| Anna | Oslo |" in parsed.text


# -- generic hostile inputs and the isolated runner --------------------------------------------

def test_zero_byte_file_is_empty() -> None:
    assert parse("empty.txt", b"").blocks == ()


def test_isolated_parse_returns_the_same_result_as_in_process() -> None:
    data = make_pdf(image=png())
    parser = PdfParser()
    isolated = asyncio.run(ParseRunner(timeout_seconds=60).parse(parser, source("a.pdf", data)))
    assert isolated == parser.parse(source("a.pdf", data))


def test_isolated_parse_memory_and_time_limits() -> None:
    text = ("word " * 2_000_000).encode()  # 10 MB of text decodes into far more than 40 MB of objects
    with pytest.raises(InvalidDocumentError, match="more memory than the limit of 150 MB"):
        asyncio.run(ParseRunner(memory_limit_mb=150).parse(CsvParser(), source("big.csv", b"a\n" + text * 3)))
    slow = "<html><body>" + "<p>x</p>" * 400_000 + "</body></html>"
    with pytest.raises(InvalidDocumentError, match=r"^parsing took more than 0\.2 seconds of CPU time, the limit for a "
                       r"document \(ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS\)$"):
        asyncio.run(ParseRunner(timeout_seconds=0.2).parse(HtmlParser(), source("slow.html", slow.encode())))


def test_text_over_the_character_limit_fails() -> None:
    runner = ParseRunner(ParseLimits(max_text_chars=1000), isolate=False)
    from ultimate_rag.adapters.parsers.text import PlainTextParser

    with pytest.raises(InvalidDocumentError, match="text has 5000 characters, more than the limit of 1000"):
        asyncio.run(runner.parse(PlainTextParser(), source("line.txt", b"x" * 5000)))


def test_a_cancelled_parse_kills_its_child_process() -> None:
    import psutil

    slow = ("<html><body>" + "<p>x</p>" * 400_000 + "</body></html>").encode()
    runner = ParseRunner(timeout_seconds=60)

    def children() -> set[int]:
        return {p.pid for p in psutil.Process().children(recursive=True)}

    async def run() -> set[int]:
        await runner.parse(HtmlParser(), source("warm.html", b"<p>warm up the forkserver</p>"))
        before = children()
        task = asyncio.create_task(runner.parse(HtmlParser(), source("slow.html", slow)))
        started = await eventually(lambda: children() - before, what="the parse child started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return started

    started = asyncio.run(run())
    assert started  # the parse ran in a child process

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    eventually_sync(lambda: {pid for pid in started if not gone(pid)}, lambda alive: not alive,
                    what="children still alive")

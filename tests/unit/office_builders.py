"""Generated test files for OCR and the office formats: scans (text rendered into an image with
WenQuanYi Zen Hei, which scripts/test.sh installs, wrapped in a PDF or saved as PNG/JPEG/TIFF/WebP),
PPTX (python-pptx), XLSX with cached formula values (XlsxWriter), EPUB and OpenDocument packages
(written as zip + XML), and hostile packages."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw, ImageFont

_FONTS = ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc", "/usr/share/fonts/wqy-zenhei/wqy-zenhei.ttc")


def cjk_font(size: int) -> ImageFont.FreeTypeFont:
    for path in _FONTS:
        if Path(path).exists():
            return ImageFont.truetype(path, size)
    raise AssertionError("WenQuanYi Zen Hei is missing (scripts/test.sh installs fonts-wqy-zenhei)")


def scan_image(lines: list[str], *, size: tuple[int, int] = (1700, 2200), font_size: int = 40,
               top: int = 200) -> Image.Image:
    """A white page (a letter-size page at 200 dpi) with the lines drawn in black, as a scanner makes it."""
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    font = cjk_font(font_size)
    for i, line in enumerate(lines):
        draw.text((150, top + i * int(font_size * 1.5)), line, font=font, fill=0)
    return image


def image_bytes(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.copy().save(buffer, fmt, **options)  # a copy: Pillow reuses a saved image's encoder settings
    return buffer.getvalue()


def multipage_tiff(pages: list[Image.Image]) -> bytes:
    buffer = io.BytesIO()
    first, *rest = [p.copy() for p in pages]
    first.save(buffer, "TIFF", save_all=True, append_images=rest, compression="tiff_deflate")
    return buffer.getvalue()


def scan_pdf(pages: list[list[str]]) -> bytes:
    """An image-only PDF: every page one scanned image, no text layer."""
    doc = pymupdf.open()
    for lines in pages:
        page = doc.new_page(width=612, height=792)
        page.insert_image(page.rect, stream=image_bytes(scan_image(lines), "PNG"))
    return doc.tobytes()


def make_pptx(slides: list[dict[str, object]]) -> bytes:
    """Slides with ``title``, ``body`` (lines), ``notes``, ``table`` (rows) and ``picture`` (bytes)."""
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for spec in slides:
        slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
        slide.shapes.title.text = str(spec.get("title", ""))
        if spec.get("body"):
            box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(1))
            box.text_frame.text = "\n".join(spec["body"])  # type: ignore[arg-type]  # spec: JSON-like
        if spec.get("table"):
            rows: list[list[str]] = spec["table"]  # type: ignore[assignment]  # spec: JSON-like
            shape = slide.shapes.add_table(len(rows), len(rows[0]), Inches(1), Inches(3.5), Inches(8), Inches(1.5))
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = value
        if spec.get("picture"):
            picture = slide.shapes.add_picture(io.BytesIO(spec["picture"]), Inches(1), Inches(5.5))  # type: ignore[arg-type]  # spec: JSON-like
            picture._element.nvPicPr.cNvPr.set("descr", str(spec.get("alt", "")))
        if spec.get("notes"):
            slide.notes_slide.notes_text_frame.text = str(spec["notes"])
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def make_xlsx(sheets: dict[str, list[list[object]]], formulas: dict[str, tuple[str, str, object]] | None = None) -> bytes:
    """Sheets of rows (row 1 first); ``formulas``: sheet → (cell, formula, cached value)."""
    import xlsxwriter

    buffer = io.BytesIO()
    workbook = xlsxwriter.Workbook(buffer, {"in_memory": True})
    for name, rows in sheets.items():
        sheet = workbook.add_worksheet(name)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if value is not None:
                    sheet.write(r, c, value)
        if formulas and name in formulas:
            cell, formula, value = formulas[name]
            sheet.write_formula(cell, formula, None, value)
    workbook.close()
    return buffer.getvalue()


def package(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else compression)
    return buffer.getvalue()


_XHTML = ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
          '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml">'
          '<head><title>{title}</title></head><body>{body}</body></html>')


def make_epub(chapters: list[tuple[str, str]], *, title: str = "A Test Book",
              images: dict[str, bytes] | None = None) -> bytes:
    """An EPUB 2 book: (table-of-contents title, XHTML body) per chapter, an NCX, images under OEBPS/images/."""
    manifest, spine, points, entries = [], [], [], {}
    for n, (label, body) in enumerate(chapters, start=1):
        entries[f"OEBPS/text/ch{n}.xhtml"] = _XHTML.format(title=label, body=body).encode()
        manifest.append(f'<item id="ch{n}" href="text/ch{n}.xhtml" media-type="application/xhtml+xml"/>')
        spine.append(f'<itemref idref="ch{n}"/>')
        points.append(f'<navPoint id="p{n}" playOrder="{n}"><navLabel><text>{label}</text></navLabel>'
                      f'<content src="text/ch{n}.xhtml"/></navPoint>')
    for name, data in (images or {}).items():
        entries[f"OEBPS/images/{name}"] = data
        manifest.append(f'<item id="img-{name}" href="images/{name}" media-type="image/png"/>')
    opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>' + title + '</dc:title></metadata>'
           '<manifest><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>' + "".join(manifest)
           + '</manifest><spine toc="ncx">' + "".join(spine) + "</spine></package>")
    ncx = ('<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>'
           + "".join(points) + "</navMap></ncx>")
    container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                 '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                 "</rootfiles></container>")
    return package({"mimetype": b"application/epub+zip", "META-INF/container.xml": container.encode(),
                    "OEBPS/content.opf": opf.encode(), "OEBPS/toc.ncx": ncx.encode(), **entries})


ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
          'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
          'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
          'xmlns:xlink="http://www.w3.org/1999/xlink" '
          'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"')
ODF_MIMES = {"text": "application/vnd.oasis.opendocument.text",
             "spreadsheet": "application/vnd.oasis.opendocument.spreadsheet",
             "presentation": "application/vnd.oasis.opendocument.presentation"}


def make_odf(kind: str, body: str, *, extra: dict[str, bytes] | None = None, prolog: str = "") -> bytes:
    """An OpenDocument package of ``kind`` (text, spreadsheet, presentation) with ``body`` inside
    ``office:body/office:{kind}``."""
    content = (f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<office:document-content {ODF_NS} office:version="1.2">'
               f"<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>")
    manifest = ('<?xml version="1.0"?><manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"/>')
    return package({"mimetype": ODF_MIMES[kind].encode(), "content.xml": content.encode(),
                    "META-INF/manifest.xml": manifest.encode(), **(extra or {})})


LAUGHS = ('<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
          '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>')


# -- files as Office and LibreOffice write them when a password or the Strict conformance is chosen ----

_STRICT = {b"http://schemas.openxmlformats.org/spreadsheetml/2006/main": b"http://purl.oclc.org/ooxml/spreadsheetml/main",
           b"http://schemas.openxmlformats.org/officeDocument/2006/relationships":
           b"http://purl.oclc.org/ooxml/officeDocument/relationships"}


def strict_xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    """A workbook saved as "Strict Open XML Spreadsheet": the ISO/IEC 29500 Strict namespaces in every
    part (relationship types included) and ``conformance="strict"`` on the workbook, as Excel writes it."""
    with zipfile.ZipFile(io.BytesIO(make_xlsx(sheets))) as source:
        parts = {name: source.read(name) for name in source.namelist()}
    for name, data in parts.items():
        if name.endswith((".xml", ".rels")):
            for old, new in _STRICT.items():
                data = data.replace(old, new)
            if name == "xl/workbook.xml":
                data = data.replace(b"<workbook ", b'<workbook conformance="strict" ', 1)
            parts[name] = data
    return package(parts)


def encrypted_ooxml(content: bytes, password: str = "secret") -> bytes:
    """An OOXML file protected with a password the way Office does it: an OLE compound file holding
    ``EncryptionInfo`` and ``EncryptedPackage`` (agile encryption, msoffcrypto-tool)."""
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(content)).encrypt(password, out)
    return out.getvalue()


def encrypted_odt(seed: int = 7) -> bytes:
    """An ODT saved with a password by LibreOffice: its XML parts are AES-encrypted (random bytes here)
    and the manifest lists an ``encryption-data`` entry for each of them."""
    import random

    rng = random.Random(seed)
    parts = {name: rng.randbytes(1800) for name in ("content.xml", "styles.xml", "meta.xml", "settings.xml")}
    entries = "".join(
        f'<manifest:file-entry manifest:full-path="{name}" manifest:media-type="text/xml" manifest:size="{len(data) + 700}">'
        '<manifest:encryption-data manifest:checksum-type="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0#sha256-1k" '
        'manifest:checksum="qSVWgs2W7NSmd6kexZKqjWLFfUHEp7XnXN2YjQ+wq1E=">'
        '<manifest:algorithm manifest:algorithm-name="http://www.w3.org/2001/04/xmlenc#aes256-cbc" '
        'manifest:initialisation-vector="oTHBFEM+XPo0hLMjO925Ww=="/>'
        '<manifest:key-derivation manifest:key-derivation-name="PBKDF2" manifest:key-size="32" '
        'manifest:iteration-count="100000" manifest:salt="oCuj7qHUEUKnK+4d6VpRcg=="/>'
        "</manifest:encryption-data></manifest:file-entry>" for name, data in parts.items())
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                '<manifest:file-entry manifest:full-path="/" manifest:version="1.2" '
                f'manifest:media-type="{ODF_MIMES["text"]}"/>{entries}</manifest:manifest>')
    return package({"mimetype": ODF_MIMES["text"].encode(), **parts, "META-INF/manifest.xml": manifest.encode()})

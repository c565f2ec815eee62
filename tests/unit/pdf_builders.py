"""PDFs generated with PyMuPDF in the shape of public files that showed PDF text defects (their
licences are unknown, so the files themselves are not committed). Each builder returns the bytes
and the strings it drew, so a test can check that every one of them reaches some block."""

from __future__ import annotations

import io
import textwrap

import pymupdf
from PIL import Image, ImageDraw

BODY = ("Dynamic languages such as JavaScript are more difficult to compile than statically typed ones. "
        "Since no concrete type information is available, traditional compilers need to emit generic "
        "code that can handle all possible type combinations at runtime.")


def _lines(page: pymupdf.Page, x: float, y: float, lines: list[str], size: float, step: float,
           font: str = "helv") -> float:
    for line in lines:
        page.insert_text((x, y), line, fontsize=size, fontname=font)
        y += step
    return y


def tracemonkey_like() -> tuple[bytes, list[str]]:
    """pdf.js tracemonkey.pdf: a title over three centred lines in a large font, authors and
    affiliations in a middle size, then sections and a smaller body text."""
    title = ["Trace-based Just-in-Time Type Specialization", "for Dynamic Languages", "with Loop Nesting"]
    authors = ["Andreas Gal, Brendan Eich, Mike Shaver, David Anderson",
               "Mozilla Corporation", "{gal,brendan,shaver,danderson}@mozilla.com"]
    body = textwrap.wrap(BODY, 90) * 3
    doc = pymupdf.open()
    page = doc.new_page()
    y = 80.0
    for line in title:  # centred, as on the real title: MuPDF makes each line a block of its own
        page.insert_text((300 - 5 * len(line), y), line, fontsize=20)
        y += 26
    y = _lines(page, 72, y + 20, authors, 12, 15)
    page.insert_text((72, y + 20), "Abstract", fontsize=12)
    y = _lines(page, 72, y + 40, body, 9, 11)
    page.insert_text((72, y + 20), "1. Introduction", fontsize=12)
    _lines(page, 72, y + 40, body, 9, 11)
    return doc.tobytes(), title + authors + ["Abstract", "1. Introduction"] + body


def cython_like() -> tuple[bytes, list[str]]:
    """pymupdf cython.pdf: a title page (title, release, authors, editor, date; no body text),
    then chapters whose body text sets the body size."""
    cover = [("Cython Reference Guide", 25), ("Release 0.29a0", 17),
             ("Stefan Behnel, Robert Bradshaw, William Stein", 17), ("Gary Furnish, Dag Seljebotn, Greg Ewing", 17),
             ("Gabriel Gellner, editor", 17), ("August 19, 2018", 12)]
    doc = pymupdf.open()
    page = doc.new_page()
    y = 200.0
    for text, size in cover:
        page.insert_text((300 - 3 * len(text), y), text, fontsize=size)
        y += size * 2.2
    page = doc.new_page()
    page.insert_text((72, 80), "Compilation", fontsize=17)
    body = textwrap.wrap(BODY, 95) * 2
    y = _lines(page, 72, 120, body, 10, 13)
    page.insert_text((72, y + 20), "1.1 Compiling from the command line", fontsize=14)
    _lines(page, 72, y + 45, body, 10, 13)
    return doc.tobytes(), [t for t, _ in cover] + ["Compilation", "1.1 Compiling from the command line"] + body


CREDIT = "截至2023年3月末，发行人各类授信额度总额达372.53亿元，其中已使用"
CREDIT_2 = "额度252.06亿元，尚未使用的授信额度为120.47亿元。"


def chinese_tables_like() -> tuple[bytes, list[str]]:
    """pymupdf chinese-tables.pdf: a table whose small font is the dominant size, and body
    paragraphs (one with 372.53亿元) and a table caption set in a larger font."""
    doc = pymupdf.open()
    page = doc.new_page()
    drawn = ["第七章企业资信状况", "二、授信情况", CREDIT, CREDIT_2, "表7-2：截至2023年3月末发行人授信及使用情况"]
    page.insert_text((72, 60), drawn[0], fontsize=16, fontname="china-s")
    page.insert_text((72, 90), drawn[1], fontsize=12, fontname="china-s")
    page.insert_text((72, 115), CREDIT, fontsize=10.5, fontname="china-s")
    page.insert_text((72, 130), CREDIT_2, fontsize=10.5, fontname="china-s")
    page.insert_text((72, 155), drawn[4], fontsize=10.5, fontname="china-s")
    y = 180.0
    banks = ["工商银行", "徽商银行南京中山北路支行", "兴业银行盐城分行", "民生银行盐城分行", "中信银行盐城分行",
             "南京银行盐城分行", "杭州银行", "江苏银行", "渤海银行", "恒丰银行南京江北支行", "上海银行盐城分行"]
    for n, bank in enumerate(banks * 2, start=1):
        cells = [(72, f"{n}"), (100, bank), (300, f"{330435.30 - n * 1000:,.2f}"), (400, f"{234850.00:,.2f}")]
        for x, cell in cells:
            page.insert_text((x, y), cell, fontsize=9, fontname="china-s")
            drawn.append(cell)
        y += 14
    page.insert_text((300, y + 10), "251,000.00", fontsize=12)  # a number in a larger font: a cell, not a heading
    drawn.append("251,000.00")
    return doc.tobytes(), drawn


NUL_TEXT = ("The harbour\x00 ferry leaves every twenty minutes from pier four\x01 and returns at noon;"
            " tickets\x07 are sold on board\x1f and at the kiosk\x1e by the gate.")


def make_pdf_with_controls() -> bytes:
    """A PDF whose extracted text holds a NUL and other control characters inside real text
    (pymupdf's mupdf_explored.pdf, py-pdf's GeoTopo-komprimiert.pdf)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Harbour\x00 notes", fontsize=20)
    _lines(page, 72, 110, textwrap.wrap(NUL_TEXT, 70), 11, 14)
    return doc.tobytes()


# What MuPDF extracts from a font without a Unicode map: glyph codes as C0 control characters,
# written down from pdf.js TAMReview.pdf page 3 (69 % of its indexed characters were such codes).
TAM_GARBAGE = ("\x02\x03\x04\x05\x03\x06\x04\x07\x08\t\n\x08\x0b\x0c\x04\x08\r\x04\x0e\x0c\x0f\t\x10\t\x11\x12"
               "\x08\x13\x0e\x0e\x04\x14\x0b\x15\x0f\x0e\x04\x08\x16\t\x17\x04\x10\x18\x08\x02\x05\x06\x11\x06"
               "\x0f\x19\x1a\x08\x1b\x04\x03\x04\x10\t\x14\x1c\x04\x0f\x0b\x19\x08\x15\x0f\x17\x08\x1d\x1e\x0b")
# pymupdf 001003ED.pdf: an advertisement in a font whose codes are letters shifted by 0x20 ("Die
# Redaktion von Spektrum" reads "$IE 2EDAKTION VON"), every space shifted down to NUL.
SHIFTED = ["$IE\x002EDAKTION\x00VON\x00", "3IE\x00ONLINE\x00SCHNELL\x0c\x00FUNDIERT\x00UND\x00VERST\xcbNDLICH\x00",
           "\xe0BER\x00DEN\x003TAND\x00DER\x00&ORSCHUNG\x0e"]
READABLE = "Unaufhörlich rast die Zukunft auf uns zu, und mehr oder weniger gekonnt werfen wir uns hinein."


def unreadable_pdf(readable_pages: int, unreadable_pages: int, *, shifted_block: bool = False) -> bytes:
    """Readable pages first, then pages whose text is glyph codes (TAMReview.pdf's shape); with
    ``shifted_block`` the readable pages also carry 001003ED.pdf's letter-shifted block."""
    doc = pymupdf.open()
    for n in range(readable_pages):
        page = doc.new_page()
        page.insert_text((72, 72), f"Page {n + 1}: {READABLE}", fontsize=10)
        page.insert_text((72, 90), READABLE, fontsize=10)
        if shifted_block:
            _lines(page, 72, 400, SHIFTED, 10, 12)
    for _ in range(unreadable_pages):
        page = doc.new_page()
        for i in range(6):
            page.insert_text((72, 72 + 14 * i), TAM_GARBAGE[i * 5:] + TAM_GARBAGE[: i * 5], fontsize=10)
    return doc.tobytes()


def zero_count_pdf() -> tuple[bytes, list[str]]:
    """A valid PDF whose page tree says /Count 0 (py-pdf's unreadablemetadata.pdf: MuPDF's repair
    finds 0 pages): MuPDF sees no pages, pypdf walks the page tree and reads both."""
    texts = ["The first page of a file whose page tree lies about its size.",
             "The second page is there too, and its text must be indexed."]
    doc = pymupdf.open()
    for text in texts:
        doc.new_page().insert_text((72, 72), text, fontsize=11)
    data = doc.tobytes(no_new_id=True)
    assert b"/Count 2" in data
    return data.replace(b"/Count 2", b"/Count 0"), texts


def table_header_pdf() -> tuple[bytes, list[str]]:
    """A table whose header row is set larger than the body (cells side by side on one line),
    next to a section heading drawn as number and title in two pieces close together."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "3.2", fontsize=14)
    page.insert_text((100, 72), "Departures", fontsize=14)
    y = _lines(page, 72, 100, textwrap.wrap(BODY, 90) * 2, 10, 13)
    header = ["Pier", "Departure", "Arrival"]
    for x, cell in zip((72, 220, 370), header, strict=True):
        page.insert_text((x, y + 20), cell, fontsize=12)
    rows = [("Four", "06:00", "06:40"), ("Two", "23:59", "00:35")]
    for r, row in enumerate(rows):
        for x, cell in zip((72, 220, 370), row, strict=True):
            page.insert_text((x, y + 40 + 14 * r), cell, fontsize=10)
    return doc.tobytes(), ["3.2", "Departures", *header, *(c for row in rows for c in row)]


# The credit table of pymupdf chinese-tables.pdf (表7-2), as drawn there: a ruled table, one
# rectangle per cell, its header in the first row.
CREDIT_HEADER = ["序号", "金融机构名称", "授信总额", "已使用情况", "剩余额度"]
CREDIT_ROWS = [
    ["1", "工商银行", "330,435.30", "234,850.00", "95,585.30"],
    ["2", "徽商银行南京中山北路支行", "330,435.30", "256,735.30", "73,700.00"],
    ["3", "兴业银行盐城分行", "302,600.00", "110,600.00", "192,000.00"],
    ["4", "民生银行盐城分行", "262,000.00", "88,500.00", "173,500.00"],
    ["5", "中信银行盐城分行", "205,088.00", "205,088.00", "0.00"],
    ["6", "南京银行盐城分行", "175,170.00", "175,170.00", "0.00"],
    ["7", "杭州银行", "109,000.00", "32,690.00", "76,310.00"],
    ["8", "江苏银行", "218,597.00", "218,597.00", "0.00"],
    ["9", "渤海银行", "98,000.00", "0.00", "98,000.00"],
    ["10", "恒丰银行南京江北支行", "93,900.00", "43,500.00", "50,400.00"],
    ["11", "上海银行盐城分行", "46,265.00", "46,265.00", "0.00"],
]


def _cell_grid(page: pymupdf.Page, x: float, y: float, widths: list[float], rows: list[list[str]],
               height: float = 20, size: float = 9, font: str = "china-s") -> float:
    for row in rows:
        left = x
        for width, cell in zip(widths, row, strict=True):
            page.draw_rect(pymupdf.Rect(left, y, left + width, y + height), width=0.5)
            # Latin digits in Helvetica: the built-in CJK font sets them a full em wide
            page.insert_text((left + 3, y + height - 6), cell, fontsize=size, fontname=font if not cell.isascii() else "helv")
            left += width
        y += height
    return y


def credit_table_pdf() -> tuple[bytes, list[list[str]]]:
    """chinese-tables.pdf's credit table: a heading, the paragraph before it, its caption and unit,
    then the ruled table (cells drawn as rectangles), the bank names and amounts in 9 pt."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 60), "二、授信情况", fontsize=12, fontname="china-s")
    page.insert_text((72, 85), CREDIT, fontsize=10.5, fontname="china-s")
    page.insert_text((72, 100), CREDIT_2, fontsize=10.5, fontname="china-s")
    page.insert_text((72, 125), "表7-2：截至2023年3月末发行人授信及使用情况", fontsize=10.5, fontname="china-s")
    page.insert_text((470, 140), "单位：万元", fontsize=9, fontname="china-s")
    _cell_grid(page, 72, 146, [40, 150, 80, 80, 80], [CREDIT_HEADER, *CREDIT_ROWS])
    return doc.tobytes(), [CREDIT_HEADER, *CREDIT_ROWS]


PIERS = [f"Pier {n}" for n in range(1, 61)]


def ruled_table_pdf() -> tuple[bytes, list[list[str]]]:
    """A ruled table with a two-row header (``Pier`` spanning both rows; ``2023`` and ``2024`` each
    spanning ``Q1`` and ``Q2``), 60 rows continued over a page break with the header drawn again,
    a running header and a "Page N of M" footer on every page. Borders are single lines, and the
    inner borders of merged cells are not drawn. Returns the bytes and the rows a reader would
    write: the column names, then the data rows."""
    doc = pymupdf.open()
    widths = [100.0, 80.0, 80.0, 80.0, 80.0]
    xs = [72.0]
    for width in widths:
        xs.append(xs[-1] + width)
    rows = [[pier, str(100 + n), str(200 + n), str(300 + n), str(400 + n)] for n, pier in enumerate(PIERS)]
    pages = [rows[:32], rows[32:]]
    for number, chunk in enumerate(pages, start=1):
        page = doc.new_page()
        page.insert_text((72, 40), "Harbour Authority Annual Report 2024", fontsize=8)
        page.insert_text((260, 810), f"Page {number} of {len(pages)}", fontsize=8)
        y = 80.0
        if number == 1:
            page.insert_text((72, 70), "Table 3: Departures by pier and quarter", fontsize=10)
        top = y
        page.draw_line((xs[0], y), (xs[-1], y), width=0.5)
        page.insert_text((xs[1] + 60, y + 14), "2023", fontsize=10)
        page.insert_text((xs[3] + 60, y + 14), "2024", fontsize=10)
        page.draw_line((xs[1], y + 20), (xs[-1], y + 20), width=0.5)  # under 2023 and 2024, not under Pier
        for k, label in enumerate(("Q1", "Q2", "Q1", "Q2")):
            page.insert_text((xs[1 + k] + 30, y + 34), label, fontsize=10)
        page.insert_text((xs[0] + 4, y + 24), "Pier", fontsize=10)
        y += 40
        page.draw_line((xs[0], y), (xs[-1], y), width=0.5)
        for row in chunk:
            for k, cell in enumerate(row):
                page.insert_text((xs[k] + 4, y + 14), cell, fontsize=10)
            y += 20
            page.draw_line((xs[0], y), (xs[-1], y), width=0.5)
        for k, x in enumerate(xs):
            if k in (2, 4):  # between Q1 and Q2: not drawn through the 2023 and 2024 cells
                page.draw_line((x, top + 20), (x, y), width=0.5)
            else:
                page.draw_line((x, top), (x, y), width=0.5)
    return doc.tobytes(), [["Pier", "2023 / Q1", "2023 / Q2", "2024 / Q1", "2024 / Q2"], *rows]


def unruled_table_pdf() -> tuple[bytes, list[list[str]]]:
    """A table of positioned text without any ruling line, its header in bold, 50 rows continued
    over a page break without the header drawn again."""
    doc = pymupdf.open()
    header = ["Vessel", "Length (m)", "Passengers", "Built"]
    rows = [[f"Ferry {n}", f"{30 + n}.5", str(200 + 7 * n), str(1990 + n % 30)] for n in range(1, 51)]
    xs = [72, 220, 320, 430]
    page = doc.new_page()
    page.insert_text((72, 60), "The fleet", fontsize=16)
    _lines(page, 72, 90, textwrap.wrap(BODY, 90), 10, 13)
    y = 150.0
    for x, cell in zip(xs, header, strict=True):
        page.insert_text((x, y), cell, fontsize=10, fontname="hebo")
    for n, row in enumerate(rows):
        y += 15
        if n == 40:
            page = doc.new_page()
            y = 72
        for x, cell in zip(xs, row, strict=True):
            page.insert_text((x, y), cell, fontsize=10)
    return doc.tobytes(), [header, *rows]


TOC = [("1 Getting Started", "3"), ("1.1 What is Cython?", "3"), ("1.2 Installing Cython", "4"),
       ("1.3 Building a Cython module", "5"), ("2 Language Basics", "6"), ("2.1 Declaring data types", "6")]
CYTHON_ANSWER = ("Cython is a programming language that makes writing C extensions for the Python language as "
                 "easy as Python itself. It is a superset of Python that also supports calling C functions and "
                 "declaring C types on variables and class attributes.")


def contents_pdf() -> tuple[bytes, list[str]]:
    """cython.pdf's shape: a title page, a contents page of entries with dot leaders (a chapter
    line without leaders), then chapters whose pages carry a running header ("Cython Reference
    Guide, Release 0.29a0") and a footer of page number and chapter title. Returns the bytes and
    the body sentences (what the index must hold)."""
    doc = pymupdf.open()
    doc.new_page().insert_text((150, 300), "Cython Reference Guide", fontsize=25)
    page = doc.new_page()
    page.insert_text((72, 80), "Contents", fontsize=20)
    y = 120.0
    for title, number in TOC:
        leader = title
        if title[1] == " ":  # a chapter: bold, no leaders, as in cython.pdf
            page.insert_text((72, y), title, fontsize=10, fontname="hebo")
            page.insert_text((530, y), number, fontsize=10, fontname="hebo")
        else:
            dots = " ." * int((510 - 86 - pymupdf.get_text_length(leader, fontsize=10)) / pymupdf.get_text_length(" .", fontsize=10))
            page.insert_text((86, y), f"{leader}{dots}", fontsize=10)
            page.insert_text((530, y), number, fontsize=10)
        y += 16
    sections = [("1.1 What is Cython?", CYTHON_ANSWER),
                ("1.2 Installing Cython", "Installing Cython needs a C compiler and pip: run pip install Cython "
                                          "in a terminal and the cythonize command becomes available."),
                ("1.3 Building a Cython module", "A Cython module is built with a setup.py file that calls "
                                                 "cythonize on the pyx sources, then compiled by setuptools."),
                ("2.1 Declaring data types", "The cdef statement declares C variables with C types, which "
                                             "lets Cython generate fast C code for loops over them.")]
    body: list[str] = []
    for page_number, (title, text) in enumerate(sections, start=3):
        page = doc.new_page()
        page.insert_text((72, 40), "Cython Reference Guide, Release 0.29a0", fontsize=8)
        page.insert_text((72, 90), title, fontsize=14)
        # enough text for a chunk of its own (~250 tokens), so that sections and contents compete
        more = " ".join(f"Example {n} of section {title[:3]} shows the compiler output for a module with "
                        f"{n + 2} functions and their generated C code." for n in range(1, 9))
        text = f"{text} {more}"
        lines = textwrap.wrap(text, 85)
        _lines(page, 72, 120, lines, 10, 13)
        page.insert_text((72, 800), f"{page_number} Chapter {title[0]}. {'Getting Started' if title[0] == '1' else 'Language Basics'}",
                         fontsize=8)
        body.append(text)
    return doc.tobytes(), body


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF from numbered object bodies (1-based), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# "مرحبا" (hello) as the contextual presentation forms an Arabic PDF's text layer gives (initial
# meem, final reh, initial hah, medial beh, final alef), with "2024" glued to it.
ARABIC_FORMS = {"A": 0xFEE3, "B": 0xFEAE, "C": 0xFEA3, "D": 0xFE92, "E": 0xFE8E}


def arabic_presentation_forms_pdf() -> bytes:
    """A page whose text layer maps its codes (through a ToUnicode CMap) to Arabic presentation
    forms, and a number glued to the word, as Arabic PDFs made by many tools read (issue shape:
    U+FExx in the index, the ordinary letters not found)."""
    codes: dict[str, int] = {**ARABIC_FORMS, **{d: ord(d) for d in "0123456789 "}}
    cmap = "\n".join(f"<{ord(k):02X}> <{v:04X}>" for k, v in codes.items())
    tounicode = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Arabic def "
                 b"1 begincodespacerange <00> <FF> endcodespacerange\n%d beginbfchar\n%s\nendbfchar\n"
                 b"endcmap CMapName currentdict /CMap defineresource pop end end" % (len(codes), cmap.encode()))
    # drawn in visual order, left to right, as PDFs of right-to-left text are: the word's last letter
    # first, the number to its left without a space
    content = b"BT /F1 14 Tf 72 700 Td (2024EDCBA) Tj 0 -30 Td (EDCBA EDCBA) Tj ET"
    return _raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(tounicode), tounicode),
    ])


def glyph_codes_pdf() -> bytes:
    """OCRmyPDF's truetype_font_nomapping.pdf: the text layer of its only page reads ``"7+%-``, the
    codes of a subset font without a Unicode map that landed on ASCII punctuation."""
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 100), '"7+%-', fontsize=24)
    return doc.tobytes()


def chart_page_pdf() -> bytes:
    """A report page with a running header line, a title, a bar chart drawn with vector paths (no
    image object) with quarter labels under its bars and a "Figure 1:" caption, and a page number."""
    body = textwrap.wrap(BODY, 90)
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 40), "Harbour Authority Annual Report 2024", fontsize=8)
    page.insert_text((72, 90), "Ferry traffic in the harbour", fontsize=18)
    y = _lines(page, 72, 120, body * 2, 10, 13) + 20
    page.draw_rect(pymupdf.Rect(100, y, 500, y + 220), color=(0, 0, 0), width=0.8)
    for k, height in enumerate([80, 150, 120, 190, 60]):
        bar = pymupdf.Rect(130 + k * 70, y + 210 - height, 170 + k * 70, y + 210)
        page.draw_rect(bar, color=(0.2, 0.3, 0.7), fill=(0.2, 0.3, 0.7))
        page.insert_text((135 + k * 70, y + 232), f"Q{k + 1}", fontsize=7)
    page.insert_text((100, y + 250), "Figure 1: Passengers carried per quarter, in thousands, all routes", fontsize=9)
    _lines(page, 72, y + 280, body * 3, 10, 13)
    page.insert_text((290, 770), "7", fontsize=9)
    return doc.tobytes()


def photo_page_pdf() -> bytes:
    """A page with a bold body-size title, a picture (an image object) and under it a caption that
    does not start with "Figure", then body text."""
    image = Image.new("RGB", (400, 240), (90, 140, 200))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 160, 400, 240), fill=(40, 90, 60))
    draw.ellipse((300, 20, 360, 80), fill=(250, 220, 90))
    png = io.BytesIO()
    image.save(png, "PNG")
    body = textwrap.wrap(BODY, 90)
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 90), "Ferry timetable and piers", fontsize=10, fontname="hebo")
    y = _lines(page, 72, 115, body * 2, 10, 13)
    page.insert_image(pymupdf.Rect(150, y + 10, 450, y + 190), stream=png.getvalue())
    page.insert_text((150, y + 205), "The north pier at dawn, seen from the morning ferry", fontsize=8)
    _lines(page, 72, y + 240, body * 2, 10, 13)
    return doc.tobytes()


def tex_math_pdf() -> bytes:
    """pdfTeX's shape for a formula: body text in a text font, then symbols in Computer Modern's
    math fonts (CMSY10, CMMI10) named but with no Unicode map, so a reader that cannot see glyph
    names gets their raw codes: f′ is ``f0`` (CMSY 0x30), ϱ is ``%`` (CMMI 0x25), ⟨x⟩ is ``hxi``,
    ‖x‖ is ``kxk`` and ≠ is ``6=`` (the negation slash 0x36 before the equals sign)."""
    content = (b"BT /F1 12 Tf 72 700 Td (The derivative f) Tj /F2 12 Tf (0) Tj /F1 12 Tf ( of the density ) Tj "
               b"/F3 12 Tf (%) Tj /F1 12 Tf ( with ) Tj /F2 12 Tf (h) Tj /F1 12 Tf (x) Tj /F2 12 Tf (i) Tj "
               b"/F1 12 Tf ( and ) Tj /F2 12 Tf (k) Tj /F1 12 Tf (x) Tj /F2 12 Tf (k) Tj /F1 12 Tf ( where a ) Tj "
               b"/F2 12 Tf (6) Tj /F1 12 Tf (= b in 2024.) Tj ET")
    fonts = [b"<< /Type /Font /Subtype /Type1 /BaseFont /%s >>" % name for name in (b"Times-Roman", b"CMSY10",
                                                                                     b"ABCDEF+CMMI10")]
    return _raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R /F2 5 0 R /F3 6 0 R >> >> /Contents 7 0 R >>",
        *fonts,
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
    ])

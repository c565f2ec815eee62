"""PDFs generated with PyMuPDF in the shape of public files that showed PDF text defects (their
licences are unknown, so the files themselves are not committed). Each builder returns the bytes
and the strings it drew, so a test can check that every one of them reaches some block."""

from __future__ import annotations

import textwrap

import pymupdf

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

"""PDFs and MDX pages that reproduce the structure of public files whose licence does not allow committing them
(see README.md): each function returns the bytes of one file, the same bytes on every run.

    python -m tests.corpus.generate OUT_DIR      # writes every file into OUT_DIR
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pymupdf

BODY = ("Trace trees record the hot loops of a program as it runs and compile each loop once its "
        "types are known. The compiler specialises the loop for the integer and double values it "
        "saw, and a guard leaves the compiled code whenever a value of another type turns up. "
        "Nested loops become nested trees, so an inner loop is compiled before the loop around it "
        "and the outer tree calls the inner one like a function.")


def _finish(doc: pymupdf.Document) -> bytes:
    """Bytes without dates or a random file identifier, so that every run writes the same file."""
    doc.set_metadata({})
    return doc.tobytes(garbage=3, deflate=True, no_new_id=True)


def _paragraph(page: pymupdf.Page, rect: pymupdf.Rect, text: str, size: float = 10, font: str = "helv") -> None:
    spare = page.insert_textbox(rect, text, fontsize=size, fontname=font)
    assert spare >= 0, "the text did not fit its box"


def three_line_title() -> bytes:
    """Like pdf.js tracemonkey.pdf: a title of three large lines, authors, then two columns of
    body text. Every title line must reach a chunk, not only the last."""
    doc = pymupdf.open()
    page = doc.new_page()
    for i, line in enumerate(("Trace-based Just-in-Time Type", "Specialization for Harbour",
                              "Timetable Languages")):
        page.insert_text((72, 80 + 28 * i), line, fontsize=24, fontname="hebo")
    page.insert_text((72, 180), "Andreas Gal, Brendan Eich, Mike Shaver, David Anderson", fontsize=11)
    page.insert_text((72, 196), "University of California, Irvine and Mozilla Corporation", fontsize=10)
    page.insert_text((72, 230), "Abstract", fontsize=12, fontname="hebo")
    _paragraph(page, pymupdf.Rect(72, 240, 300, 520), BODY)
    _paragraph(page, pymupdf.Rect(310, 240, 540, 520), BODY.replace("Trace trees", "Type-specialised trees"))
    return _finish(doc)


def title_page() -> bytes:
    """Like PyMuPDF's cython.pdf: a title page of short lines in large fonts (title, release,
    authors, editor, date) and nothing else; the body starts on page 2."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((300, 200), "Harbour Reference Guide", fontsize=24.8, fontname="hebo")
    lines = (("Release 0.29a0", "hebo"), ("Stefan Behnel, Robert Bradshaw, William Stein", "hebo"),
             ("Gary Furnish, Dag Seljebotn, Greg Ewing", "hebo"), ("Gabriel Gellner, editor", "hebi"),
             ("August 19, 2018", "hebo"))
    for i, (line, font) in enumerate(lines):
        page.insert_text((120, 250 + 30 * i), line, fontsize=17.2, fontname=font)
    page = doc.new_page()
    page.insert_text((72, 80), "Contents", fontsize=18, fontname="hebo")
    _paragraph(page, pymupdf.Rect(72, 100, 540, 400), BODY)
    return _finish(doc)


def table_dominant() -> bytes:
    """Like PyMuPDF's chinese-tables.pdf: a table whose 10.4 pt cells hold most characters, and a
    body paragraph in 12 pt (larger than the dominant font) with 372.53亿元 between two tables."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 60), "第七章企业资信状况", fontsize=14.1, fontname="china-s")
    page.insert_text((72, 84), "一、发行人历史信用评级情况", fontsize=12, fontname="china-s")

    def table(top: float, rows: Sequence[tuple[str, ...]]) -> float:
        widths = (60, 60, 240, 120)
        for r, row in enumerate(rows):
            x = 72.0
            for c, cell in enumerate(row):
                rect = pymupdf.Rect(x, top + 34 * r, x + widths[c], top + 34 * (r + 1))
                page.draw_rect(rect, width=0.5)
                _paragraph(page, pymupdf.Rect(rect.x0 + 2, rect.y0 + 2, rect.x1 - 2, rect.y1 - 2), cell, size=10.4, font="china-s")
                x += widths[c]
        return top + 34 * len(rows)

    rating = ("偿还债务的能力很强，受不利经济环境的影响不大", "联合资信评估有限公司")
    bottom = table(100, [("年份", "主体信用", "涵义", "评级机构")]
                   + [(str(year), "AA+", *rating) for year in range(2023, 2017, -1)])
    page.insert_text((72, bottom + 24), "二、授信情况", fontsize=12, fontname="china-s")
    _paragraph(page, pymupdf.Rect(72, bottom + 32, 540, bottom + 80),
               "截至2023年3月末，发行人各类授信额度总额达372.53亿元，其中已使用额度252.06亿元，"
               "尚未使用的授信额度为120.47亿元。", size=12, font="china-s")
    table(bottom + 90, [("序号", "金融机构", "授信总额", "剩余额度")]
          + [(str(i), "工商银行", f"{330435.30 + i:,.2f}", f"{95585.30 + i:,.2f}") for i in range(1, 7)])
    return _finish(doc)


def control_characters() -> bytes:
    """Text whose layer holds NUL and other control characters (as GeoTopo-komprimiert.pdf and
    PyMuPDF's mupdf_explored.pdf yield): they must never reach PostgreSQL or a chunk."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Control characters in a text layer", fontsize=16, fontname="hebo")
    for i, line in enumerate(("The ferry\x00 leaves pier four\x00 every twenty minutes.",
                              "Bell\x07 escape\x1b and backspace\x08 sit between these words.",
                              "A form feed\x0c and a vertical tab\x0b end this line.")):
        page.insert_text((72, 110 + 20 * i), line, fontsize=11)
    _paragraph(page, pymupdf.Rect(72, 180, 540, 400), BODY.replace(". ", ".\x00 "))
    return _finish(doc)


def image_only() -> bytes:
    """One page that is a picture and nothing else (as cmyk-image.pdf, pdf.js cmykjpeg.pdf)."""
    doc = pymupdf.open()
    page = doc.new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 48), False)
    for x in range(64):
        for y in range(48):
            pix.set_pixel(x, y, ((x * 4) % 256, (y * 5) % 256, (x * y) % 256))
    page.insert_image(pymupdf.Rect(72, 72, 392, 312), stream=pix.tobytes("png"))
    return _finish(doc)


def letter_shifted() -> bytes:
    """Like PyMuPDF's 001003ED.pdf: an embedded subset font without a ToUnicode map, so every
    extractor reads glyph numbers and gets letter-shifted text (")FMMP" for "Hello")."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_font(fontname="F0", fontbuffer=pymupdf.Font("cjk").buffer)
    page.insert_text((72, 72), "Editorial", fontsize=18, fontname="F0")
    _paragraph(page, pymupdf.Rect(72, 90, 540, 400), BODY, font="F0")
    doc.subset_fonts()
    stripped = pymupdf.open("pdf", doc.tobytes(garbage=3, no_new_id=True))
    for xref in range(1, stripped.xref_length()):
        keys = stripped.xref_get_keys(xref)
        if "ToUnicode" in keys:
            stripped.xref_set_key(xref, "ToUnicode", "null")
        for key in ("BaseFont", "FontName"):  # the subset prefix is random: fix it
            kind, value = stripped.xref_get_key(xref, key) if key in keys else ("null", "")
            if kind == "name" and "+" in value:
                stripped.xref_set_key(xref, key, "/AAAAAA+" + value.split("+", 1)[1].replace(" ", ""))
    return _finish(stripped)


MDX_TEXT = {
    "ko": ("항구 페리 시간표 컴포넌트", (
        "*컴포넌트*는 시간표 화면을 만드는 기본 단위입니다. 페리 시간표 앱은 작은 컴포넌트 여러 개로 이루어져 있습니다.",
        "이 장에서는 출발 시각을 보여 주는 컴포넌트를 만들고, 그것을 다른 컴포넌트 안에서 사용하는 방법을 배웁니다.",
        "컴포넌트 이름은 항상 대문자로 시작해야 하며, 그렇지 않으면 브라우저가 일반 태그로 해석합니다.",
        "컴포넌트 안에서 다른 컴포넌트를 정의하면 렌더링할 때마다 새로 만들어져 상태가 초기화됩니다.",
        "큰 앱에서도 버튼 하나부터 전체 페이지까지 모든 부분이 컴포넌트로 구성됩니다.",
    )),
    "zh": ("港口渡轮时刻表组件", (
        "*组件*是构建时刻表界面的基本单位。一个渡轮时刻表应用由许多小组件组成。",
        "本章将创建一个显示出发时间的组件，并学习如何在另一个组件中使用它。",
        "组件名称必须始终以大写字母开头，否则浏览器会把它当作普通标签。",
        "如果在组件内部定义另一个组件，每次渲染都会重新创建它，状态也会被重置。",
        "即使在大型应用中，从一个按钮到整个页面，所有部分都是由组件构成的。",
    )),
}


def mdx_page(language: str) -> bytes:
    """Like the MDX pages of reactjs/ko.react.dev and zh-hans.react.dev (src/content/learn/*.md):
    front matter, JSX blocks (<Intro>, <Sandpack>, <Pitfall>, <DeepDive>, <Solution>) on lines of
    their own, and headings with ``{/*anchor*/}`` ids. The tags and anchors are syntax, not text."""
    title, p = MDX_TEXT[language]
    code = ("```js\nexport default function Departure() {\n  return <p>Pier four, 07:40</p>;\n}\n```\n\n"
            "```css\np { font-weight: bold; }\n```")
    page = f"""---
title: {title}
---

<Intro>

{p[0]}

</Intro>

<YouWillLearn>

* {p[1]}

</YouWillLearn>

## {title} {{/*defining-a-component*/}}

{p[1]}

<Sandpack>

{code}

</Sandpack>

### 1. {title} {{/*step-1-export*/}}

<Pitfall>

{p[2]}

</Pitfall>

### 2. {title} {{/*step-2-nesting*/}}

{p[3]}

<DeepDive>

#### {title} {{/*components-all-the-way-down*/}}

{p[4]}

</DeepDive>

<Recap>

* {p[0]}
* {p[2]}

</Recap>

<Challenges>

#### {title} {{/*export-the-component*/}}

{p[3]}

<Solution>

<Sandpack>

{code}

</Sandpack>

</Solution>

</Challenges>
"""
    return page.encode()


GENERATORS: dict[str, Callable[[], bytes]] = {
    "three-line-title.pdf": three_line_title,
    "title-page.pdf": title_page,
    "table-dominant-cjk.pdf": table_dominant,
    "control-characters.pdf": control_characters,
    "image-only.pdf": image_only,
    "letter-shifted.pdf": letter_shifted,
    "mdx-page-ko.md": lambda: mdx_page("ko"),
    "mdx-page-zh.md": lambda: mdx_page("zh"),
}


def write_all(directory: Path, generators: dict[str, Callable[[], bytes]] | None = None) -> list[Path]:
    """Every file of ``generators`` (these PDFs and pages by default) written into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in (GENERATORS if generators is None else generators).items():
        path = directory / name
        path.write_bytes(build())
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "generated")):
        print(written)

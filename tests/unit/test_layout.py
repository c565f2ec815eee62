"""The layout model (adapters/parsers/layout.py, PP-PicoDet CDLA shipped in the package) on generated
pages: a title over two columns of text, a full-width page, a blank page."""

from __future__ import annotations

from PIL import Image, ImageDraw

from ultimate_rag.adapters.parsers.layout import KINDS, MODEL, Region, detect

from .office_builders import cjk_font

WORDS = "harbour ferry leaves every twenty minutes from pier four in the morning and evening".split()


def page(columns: int) -> Image.Image:
    """A 200 dpi letter page: a large title, then ``columns`` columns of 30 lines of text."""
    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    draw.text((150, 150), "Annual Report of the Harbour", font=cjk_font(56), fill=0)
    body = cjk_font(28)
    width = (1400 - 80 * (columns - 1)) // columns
    for c in range(columns):
        for i in range(30):
            words = [WORDS[(i * 7 + c * 3 + k) % len(WORDS)] for k in range(30)]
            line = " ".join(words)
            while body.getlength(line) > width:
                line = line.rsplit(" ", 1)[0]
            draw.text((150 + c * (width + 80), 300 + i * 44), line, font=body, fill=0)
    return image


def test_a_two_column_page_has_a_title_and_one_text_region_per_column() -> None:
    assert MODEL.is_file() and MODEL.stat().st_size > 1_000_000
    regions = detect(page(2))
    assert all(isinstance(r, Region) and r.kind in KINDS and 0.5 <= r.score <= 1 for r in regions)
    titles = [r for r in regions if r.kind == "title"]
    texts = sorted((r for r in regions if r.kind == "text"), key=lambda r: r.box[0])
    assert len(titles) == 1 and titles[0].box[3] < 300
    assert len(texts) == 2
    left, right = texts
    assert left.box[2] < 860 < right.box[0]  # the gutter between the columns
    for region in texts:
        x0, y0, x1, y1 = region.box
        assert 100 < x0 < x1 < 1600 and 250 < y0 < 400 and 1500 < y1 < 1700


def test_one_column_and_a_blank_page() -> None:
    texts = [r for r in detect(page(1)) if r.kind == "text"]
    assert len(texts) == 1 and texts[0].box[2] - texts[0].box[0] > 1000
    assert detect(Image.new("RGB", (1700, 2200), "white")) == []
    assert detect(Image.new("RGB", (0, 0))) == []

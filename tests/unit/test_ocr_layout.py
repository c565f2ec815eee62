"""OCR output as structure (adapters/parsers/ocr_layout.py) and what the OCR model reads: a real
two-column scan read column by column with its title as a heading and its running header and page
number left out; diacritics and kana kept; two large characters read; a Korean scan reported, not
indexed as noise. The rules for tables, figures with captions and split lines run on lines and
regions written by hand (no model: milliseconds)."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.layout import Region
from ultimate_rag.adapters.parsers.ocr import Line, Reading
from ultimate_rag.adapters.parsers.ocr_layout import needs_layout, read_page, structure
from ultimate_rag.adapters.parsers.ocr_lines import paragraphs, rows
from ultimate_rag.domain.models import DocumentSource

from .office_builders import cjk_font, image_bytes, scan_image

LEFT = ["The morning ferry now leaves", "from pier four at seven and", "returns before the noon tide."]
RIGHT = ["Cargo is loaded on the lower", "deck after the passengers are", "seated, said the harbour master."]


def two_column_scan() -> Image.Image:
    """Half a letter page at 200 dpi: a running header, a title, two columns, a page number."""
    image = Image.new("L", (1100, 1400), 255)
    draw = ImageDraw.Draw(image)
    draw.text((80, 40), "Harbour Gazette   Spring issue", font=cjk_font(24), fill=0)
    draw.text((80, 150), "Ferry Timetable Changes", font=cjk_font(56), fill=0)
    for i, (left, right) in enumerate(zip(LEFT, RIGHT, strict=True)):
        draw.text((80, 290 + i * 44), left, font=cjk_font(30), fill=0)
        draw.text((590, 290 + i * 44), right, font=cjk_font(30), fill=0)
    draw.text((540, 1330), "7", font=cjk_font(26), fill=0)
    return image.convert("RGB")


def test_a_two_column_scan_is_read_column_by_column_with_its_title_and_without_furniture() -> None:
    page = read_page(two_column_scan(), 3, scale=2.0, asset_key="page-3/scan")
    assert [(b.kind, b.level, b.text) for b in page.blocks] == [
        ("heading", 1, "Ferry Timetable Changes"),
        ("paragraph", 0, " ".join(LEFT)),
        ("paragraph", 0, " ".join(RIGHT))]
    assert page.furniture == ["Harbour Gazette Spring issue", "7"]
    for block in page.blocks:
        assert block.locator.page == 3 and block.asset_ids == ("page-3/scan",) and block.locator.bbox
        x0, y0, x1, y1 = block.locator.bbox
        assert 0 <= x0 < x1 <= 550 and 0 <= y0 < y1 <= 700  # in the page's units (2 pixels each)


def test_diacritics_kana_and_two_large_characters_are_read() -> None:
    lines = ["Die Prüfung für Mädchen in München", "O cão e o coração da mãe", "ひらがなとカタカナのテキスト"]
    data = image_bytes(scan_image(lines, size=(1200, 360), top=40), "PNG")
    text = default_registry().resolve(DocumentSource(None, "a.png", "image/png", data)).parse(
        DocumentSource(None, "a.png", "image/png", data)).text
    for line in lines:
        assert "".join(line.split()) in "".join(text.split()), text
    poster = Image.new("L", (900, 700), 255)
    ImageDraw.Draw(poster).text((60, 120), "中国", font=cjk_font(360), fill=0)
    src = DocumentSource(None, "poster.png", "image/png", image_bytes(poster, "PNG"))
    parsed = default_registry().resolve(src).parse(src)
    assert "中国" in parsed.text and "warnings" not in parsed.metadata


def test_a_korean_scan_is_reported_and_its_noise_not_indexed() -> None:
    korean = ["한국어 문서를 읽을 수 있습니까", "서울의 날씨는 오늘 맑습니다", "계약서 제칠 조항이 발효되었습니다"]
    src = DocumentSource(None, "ko.png", "image/png", image_bytes(scan_image(korean, size=(1200, 300), top=40), "PNG"))
    parsed = default_registry().resolve(src).parse(src)
    assert [b.kind for b in parsed.blocks] == ["figure"]  # the image stays, for the vision step
    [warning] = parsed.metadata["warnings"]
    assert warning.startswith("the image: most of the text is in a script the offline OCR cannot read")
    assert "Korean" in warning and "ULTIMATE_RAG_VISION_BASE_URL" in warning
    assert Reading((), unread=3).foreign_script and not Reading((Line("a", (0, 0, 1, 1)),) * 3, 2).foreign_script


def line(text: str, x0: float, y0: float, x1: float, height: float = 30) -> Line:
    return Line(text, (x0, y0, x1, y0 + height))


def test_lines_of_two_columns_at_the_same_height_form_one_paragraph_per_column() -> None:
    lines = [line("left one", 100, 100, 500), line("right one", 700, 102, 1100),
             line("left two", 100, 140, 480), line("right two", 700, 141, 1050),
             line("split", 100, 300, 180), line("line", 190, 301, 260)]  # one line the detector cut in two
    assert [[li.text for li in group] for group in paragraphs(lines)] == [
        ["left one", "left two"], ["right one", "right two"], ["split line"]]
    assert [[li.text for li in row] for row in rows(lines[:2])] == [["left one", "right one"]]


def test_a_table_region_becomes_a_markdown_table_and_a_figure_a_crop_described_by_its_caption() -> None:
    cells = [("Item", "Count"), ("Rope", "12"), ("Flares", "40")]
    lines = [line(text, 120 + 400 * c, 520 + 50 * r, 300 + 400 * c) for r, row in enumerate(cells)
             for c, text in enumerate(row)]
    lines += [line("Figure 2: the new pier", 120, 420, 520)]
    regions = [Region("table", (100, 500, 900, 680), 0.9), Region("figure", (100, 100, 900, 400), 0.9),
               Region("figure_caption", (110, 410, 600, 460), 0.8)]
    page = structure(lines, regions, Image.new("RGB", (1000, 1400), "white"), 2, scale=1.0, asset_key=None)
    assert [(b.kind, b.text) for b in page.blocks] == [
        ("figure", "[Image on page 2: Figure 2: the new pier]"),
        ("table", "| Item | Count |\n| --- | --- |\n| Rope | 12 |\n| Flares | 40 |")]
    [crop] = page.assets
    assert crop.locator_key == "page-2/figure-1" and crop.mime_type == "image/jpeg" and crop.page == 2
    assert page.blocks[0].asset_ids == ("page-2/figure-1",)
    assert Image.open(io.BytesIO(crop.data)).size == (800, 300)


def test_a_figure_that_fills_the_page_is_not_cropped_out_of_it() -> None:
    """A photo uploaded as an image: the page image is the figure already; its text stays."""
    lines = [line("EXIT", 400, 300, 600, 80)]
    page = structure(lines, [Region("figure", (10, 10, 990, 1390), 0.9)], Image.new("RGB", (1000, 1400), "white"),
                     1, scale=1.0, asset_key="page-1/image")
    assert [(b.kind, b.text, b.asset_ids) for b in page.blocks] == [("paragraph", "EXIT", ("page-1/image",))]
    assert page.assets == []


def test_the_model_runs_only_on_pages_whose_lines_suggest_structure() -> None:
    body = [line(f"plain body text line {i}", 150, 300 + 45 * i, 1500) for i in range(20)]
    assert not needs_layout(body, 2200)  # one column of plain text: the model is skipped
    assert not needs_layout(body[:2], 2200)  # too few lines to order
    assert needs_layout([*body, line("Annual Report", 150, 150, 700, 60)], 2200)  # a title
    assert needs_layout([*body, line("Gazette, page 3", 150, 40, 500)], 2200)  # a running header
    columns = [line(f"left {i}", 150, 300 + 45 * i, 780) for i in range(10)]
    columns += [line(f"right {i}", 900, 300 + 45 * i, 1530) for i in range(10)]
    assert needs_layout(columns, 2200)


def test_a_running_header_the_model_calls_a_footer_is_still_furniture() -> None:
    lines = [line("Harbour Authority, Annual Report", 150, 60, 660, 28),
             *(line(f"body line {i}", 150, 300 + 45 * i, 1500) for i in range(5))]
    regions = [Region("header", (152, 61, 657, 89), 0.8), Region("footer", (150, 62, 658, 89), 0.7),
               Region("text", (140, 290, 1510, 540), 0.9), Region("footer", (140, 1000, 1500, 1040), 0.6)]
    page = structure(lines, regions, Image.new("RGB", (1700, 2200), "white"), 1, scale=1.0, asset_key=None)
    assert page.furniture == ["Harbour Authority, Annual Report"]
    assert [b.kind for b in page.blocks] == ["paragraph"] and page.blocks[0].text.startswith("body line 0")

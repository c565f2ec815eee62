"""HTML main content (readability-lxml): realistic generated pages in English, Chinese and Korean
(article + navigation + sidebar + comments + footer) keep the article with its title, headings,
tables, lists, code and ``data:`` images and lose the rest; pages with no identifiable main content
(short, one table) keep all their text through the full-page fallback."""

from __future__ import annotations

import base64

import pytest

from ultimate_rag.adapters.parsers.html import HtmlParser
from ultimate_rag.domain.models import DocumentSource

from .test_format_parsers import png

NOISE = ("Home", "Subscribe to our newsletter", "Popular this week", "Great article, thanks",
         "Copyright 2026 Port Media", "首页", "热门文章", "写得太好了", "版权所有", "홈", "인기 기사", "좋은 글 감사합니다",
         "저작권")

ARTICLES = {
    "en": ("Harbour ferries change their winter timetable",
           [f"Paragraph {i}: the harbour ferry from pier four will leave every twenty minutes in winter, "
            f"and the night service, which carried {i * 17} passengers last year, stops at eleven." for i in range(8)],
           "Timetable"),
    "zh": ("港口渡轮调整冬季时刻表",
           [f"第{i}段：冬季期间，四号码头的港口渡轮每二十分钟发一班，去年运送了{i * 17}名乘客的夜班服务将在十一点停止运营，"
            "市民出行请提前查询最新时刻表并合理安排时间。" for i in range(8)],
           "时刻表"),
    "ko": ("항구 페리 겨울 시간표 변경",
           [f"{i}번째 문단: 겨울 동안 4번 부두의 항구 페리는 20분마다 출발하며, 작년에 {i * 17}명의 승객을 태운 "
            "야간 운항은 11시에 종료됩니다. 시민들은 최신 시간표를 미리 확인하시기 바랍니다." for i in range(8)],
           "시간표"),
}


def page(lang: str, image: bytes | None = None) -> bytes:
    title, paragraphs, section = ARTICLES[lang]
    first, rest = paragraphs[:4], paragraphs[4:]
    img = (f'<figure><img src="data:image/png;base64,{base64.b64encode(image).decode()}" alt="Pier map"></figure>'
           if image else "")
    links = " ".join(f'<li><a href="/section/{n}">{word}</a></li>' for n, word in
                     enumerate(["Home", "首页", "홈", "World", "Sport", "Business", "Weather"]))
    popular = "".join(f'<li><a href="/story/{n}">Popular this week: story {n} 热门文章 인기 기사</a></li>' for n in range(12))
    comments = "".join(f'<div class="comment"><span class="author">reader{n}</span><p>Great article, thanks! '
                       f'写得太好了 좋은 글 감사합니다 ({n})</p></div>' for n in range(6))
    return f"""<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>{title} | Port Media</title>
<script>window.track = "tracking";</script></head><body>
<div id="top"><ul class="menu">{links}</ul><div class="newsletter">Subscribe to our newsletter</div></div>
<div id="page"><div id="content" class="article-body"><h1>{title}</h1>
<p class="byline">{''.join(first[:1])}</p>{''.join(f'<p>{p}</p>' for p in first[1:])}{img}
<h2>{section}</h2><table><tr><th>Pier</th><th>Time</th></tr><tr><td>4</td><td>06:00</td></tr>
<tr><td>5</td><td>06:20</td></tr></table>
<ul><li>Night service ends at 23:00</li><li>Tickets from the machine on pier four</li></ul>
<pre>ferry --pier 4 --every 20m</pre>
{''.join(f'<p>{p}</p>' for p in rest)}</div>
<div id="sidebar" class="sidebar"><h3>Popular</h3><ul>{popular}</ul></div>
<div id="comments" class="comments">{comments}</div></div>
<div id="footer" class="footer"><p>Copyright 2026 Port Media. 版权所有. 저작권.</p></div></body></html>""".encode()


def parse(name: str, content: bytes):
    return HtmlParser().parse(DocumentSource(None, name, "text/html", content))


@pytest.mark.parametrize("lang", ["en", "zh", "ko"])
def test_article_kept_with_title_headings_table_list_code_and_image(lang: str) -> None:
    picture = png()
    parsed = parse(f"{lang}.html", page(lang, picture))
    title, paragraphs, section = ARTICLES[lang]
    text = parsed.text
    assert parsed.metadata["extraction"] == "main-content"
    for paragraph in paragraphs:
        assert paragraph in text
    for noise in (*NOISE, "tracking"):
        assert noise not in text, noise
    assert [(b.text, b.level) for b in parsed.blocks if b.kind == "heading"] == [(title, 1), (section, 2)]
    assert "| Pier | Time |\n|---|---|\n| 4 | 06:00 |\n| 5 | 06:20 |" in text
    assert "- Night service ends at 23:00\n- Tickets from the machine on pier four" in text
    assert "```\nferry --pier 4 --every 20m\n```" in text
    assert parsed.assets[0].data == picture and parsed.assets[0].description == "Pier map"
    assert any(b.kind == "figure" and b.asset_ids == ("img-1",) for b in parsed.blocks)


def test_title_from_the_title_element_when_the_article_has_no_h1() -> None:
    body = page("en").replace(b"<h1>", b"<p class='kicker'>").replace(b"</h1>", b"</p>")
    parsed = parse("no-h1.html", body)
    assert parsed.blocks[0].kind == "heading" and parsed.blocks[0].level == 1
    assert parsed.blocks[0].text == ARTICLES["en"][0]  # "| Port Media" removed


def test_an_alt_text_that_is_a_file_name_is_not_indexed() -> None:
    photo = '<p><img src="/photos/30-IMG_4228.jpg" alt="30-IMG_4228.jpg"><img src="/m.png" alt="Pier map"></p>'
    parsed = parse("photos.html", page("en").replace(b"<h2>", photo.encode() + b"<h2>", 1))
    assert "IMG_4228" not in parsed.text and "[Image: Pier map]" in parsed.text


def test_short_page_keeps_all_its_text() -> None:
    short = b"<html><body><nav><a href='/'>Home</a></nav><p>Closed today.</p><div>Back tomorrow at nine.</div></body></html>"
    parsed = parse("short.html", short)
    assert parsed.metadata["extraction"] == "full-page"
    assert "Closed today." in parsed.text and "Back tomorrow at nine." in parsed.text and "Home" not in parsed.text


def test_table_only_page_keeps_every_cell() -> None:
    rows = "".join(f"<tr><td>code-{n}</td><td>{n * 3}</td><td>pier {n % 7}</td></tr>" for n in range(150))
    parsed = parse("table.html", f"<html><body><table><tr><th>Code</th><th>Value</th><th>Where</th></tr>{rows}"
                                 "</table></body></html>".encode())
    for n in range(150):
        assert f"| code-{n} | {n * 3} | pier {n % 7} |" in parsed.text


def test_page_whose_extraction_keeps_a_sliver_falls_back_to_the_full_page() -> None:
    """Many short link-free snippets, each scored low: readability keeps one, the page keeps all."""
    cards = "".join(f'<div class="card"><span>Ferry notice {n}: pier {n} opens at {n}:00 on weekdays</span></div>'
                    for n in range(60))
    parsed = parse("cards.html", f"<html><body>{cards}</body></html>".encode())
    for n in range(60):
        assert f"Ferry notice {n}: pier {n} opens at {n}:00 on weekdays" in parsed.text

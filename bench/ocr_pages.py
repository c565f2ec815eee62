"""Scanned pages whose text is known, for OCR accuracy and speed (bench/ocr_engines.py,
bench/parse_ocr.py, bench/layout.py): English, Chinese, Latin with diacritics, Japanese kana,
Korean, a page of two large characters, and two-column pages. Rendered at 200 dpi on a letter
page (1700×2200 pixels) with DejaVu Serif (Latin) and WenQuanYi Zen Hei (CJK; scripts/test.sh
installs fonts-wqy-zenhei), deterministic. Character error rate (CER): edit distance over the
truth's length, whitespace removed (spacing is not what a reader loses)."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

CJK_FONT = "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"
LATIN_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
SIZE = (1700, 2200)  # a letter page at 200 dpi
MARGIN = 150

EN_WORDS = ("the harbour ferry leaves every twenty minutes from pier four in morning and evening service "
            "passengers should buy a ticket before boarding while cargo is loaded on the lower deck captain "
            "reports weather tide and route changes to the office notice board schedule island bridge season "
            "invoice payment of rope signal flares foghorn membranes was received in March contract clause "
            "seven applies to all deliveries made after the first quarter report shows revenue growth of "
            "percent compared with last year committee approved budget for maintenance repairs lighthouse "
            "keeper records storms visitors museum archive library catalogue volume chapter page").split()
ZH_CHARS = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可"
            "她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老"
            "从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给"
            "等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先"
            "山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何"
            "更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服林题建南度"
            "统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近"
            "留红治决周保达办运武半候七必城父强步完革深区即求品士转量空众技轻程告江语英基派满式李息写识极令黄德")
DIACRITICS = ("Die Prüfung für Mädchen und Bäcker in München ist größer als früher.",
              "O cão e o coração da mãe estão em São João, não em Portugal.",
              "La façade du château est déjà crème, où l'élève naïve a été.",
              "El niño de España llegó mañana con señor Muñoz y la canción.",
              "Über die Straße gehen Müller, Schön und Käse für die Gebühr.",
              "Ação, irmã, avó e pão: as lições da educação são essenciais.")
KANA = ("ひらがなとカタカナのテキストです。",
        "こんにちは、ありがとうございます。",
        "コンピューターとデータベースのプログラム",
        "東京の天気はとても良いです。",
        "ネットワークのセキュリティについて",
        "さようなら、またあしたね。")
KOREAN = ("한국어 문서를 읽을 수 있습니까",
          "서울의 날씨는 오늘 맑습니다",
          "계약서 제칠 조항이 발효되었습니다",
          "회의는 오후 세 시에 시작합니다")


@dataclass(frozen=True, slots=True)
class Page:
    """A rendered page, its lines in reading order, and what it tests."""

    kind: str
    image: Image.Image
    lines: tuple[str, ...]

    @property
    def truth(self) -> str:
        return "".join("".join(self.lines).split())


def _font(path: str, size: int) -> ImageFont.FreeTypeFont:
    if not Path(path).exists():
        raise SystemExit(f"{path} is missing (scripts/test.sh installs fonts-wqy-zenhei and DejaVu)")
    return ImageFont.truetype(path, size)


def _draw(lines: list[str], font: ImageFont.FreeTypeFont, *, size: tuple[int, int] = SIZE, left: int = MARGIN,
          top: int = MARGIN, step: int | None = None, image: Image.Image | None = None) -> Image.Image:
    image = image or Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    step = step or int(font.size * 1.5)
    for i, line in enumerate(lines):
        draw.text((left, top + i * step), line, font=font, fill=0)
    return image


def _wrap(words: list[str], font: ImageFont.FreeTypeFont, width: float) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}".strip()
        if current and font.getlength(candidate) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def english_page(seed: int, lines: int = 40) -> Page:
    rng = random.Random(seed)
    font = _font(LATIN_FONT, 30)
    words = []
    for _ in range(lines * 14):
        word = rng.choice(EN_WORDS)
        words.append(word.capitalize() if rng.random() < 0.08 else word + ("," if rng.random() < 0.05 else ""))
    text = _wrap(words, font, SIZE[0] - 2 * MARGIN)[:lines]
    text = [f"{n + 1}. {line}" if n % 10 == 0 else line for n, line in enumerate(text)]
    return Page("en", _draw(text, font), tuple(text))


def chinese_page(seed: int, lines: int = 40) -> Page:
    rng = random.Random(seed)
    font = _font(CJK_FONT, 30)
    per_line = (SIZE[0] - 2 * MARGIN) // 30 - 1
    text = ["".join(rng.choice(ZH_CHARS) for _ in range(per_line - rng.randrange(0, 6))) + "。"
            for _ in range(lines)]
    return Page("zh", _draw(text, font), tuple(text))


def fixed_page(kind: str, lines: tuple[str, ...], font_path: str, size: int = 36) -> Page:
    return Page(kind, _draw(list(lines), _font(font_path, size), step=int(size * 2.2)), lines)


def big_characters_page() -> Page:
    """Two large clear Chinese characters in the middle of a page (a poster, a cover)."""
    font = _font(CJK_FONT, 420)
    image = _draw(["中国"], font, left=430, top=800)
    return Page("big", image, ("中国",))


def two_column_page(seed: int, *, zh: bool = False) -> Page:
    """A title across the page, then two columns of body text; the reading order is the title,
    the left column top to bottom, then the right one. A running header and a page number are on
    the page but not in its text (furniture)."""
    rng = random.Random(seed)
    font = _font(CJK_FONT if zh else LATIN_FONT, 28)
    title_font = _font(CJK_FONT if zh else LATIN_FONT, 56)
    gutter = 80
    col = (SIZE[0] - 2 * MARGIN - gutter) // 2
    if zh:
        per_line = col // 28 - 1
        left = ["".join(rng.choice(ZH_CHARS) for _ in range(per_line)) for _ in range(36)]
        right = ["".join(rng.choice(ZH_CHARS) for _ in range(per_line)) for _ in range(36)]
        title = "港口年度报告"
    else:
        left = _wrap([rng.choice(EN_WORDS) for _ in range(36 * 8)], font, col)[:36]
        right = _wrap([rng.choice(EN_WORDS) for _ in range(36 * 8)], font, col)[:36]
        title = "Annual Report of the Harbour"
    image = _draw([title], title_font)
    _draw(left, font, left=MARGIN, top=MARGIN + 140, step=44, image=image)
    _draw(right, font, left=MARGIN + col + gutter, top=MARGIN + 140, step=44, image=image)
    # page furniture, not part of the text: a running header and a page number
    _draw(["Harbour Authority  ·  Annual Report 2026"], _font(LATIN_FONT, 24), top=60, image=image)
    _draw([str(seed)], _font(LATIN_FONT, 26), left=SIZE[0] // 2, top=SIZE[1] - 110, image=image)
    return Page("two-column-zh" if zh else "two-column", image, (title, *left, *right))


def accuracy_pages(count: int = 4) -> list[Page]:
    """``count`` English and ``count`` Chinese pages, and one page each of diacritics, kana,
    Korean and two large characters."""
    pages = [english_page(i) for i in range(count)] + [chinese_page(100 + i) for i in range(count)]
    pages += [fixed_page("latin-diacritics", DIACRITICS, LATIN_FONT), fixed_page("ja-kana", KANA, CJK_FONT),
              fixed_page("ko", KOREAN, CJK_FONT), big_characters_page()]
    return pages


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def cer(predicted: str, truth: str) -> float:
    """Levenshtein distance / len(truth), whitespace removed from both (one numpy row at a time)."""
    a = "".join(predicted.split())
    b = "".join(truth.split())
    if not b:
        return float(bool(a))
    codes_b = np.array([ord(c) for c in b], dtype=np.int64)
    steps = np.arange(len(b) + 1, dtype=np.int64)
    row = steps.copy()
    for i, ch in enumerate(a, start=1):
        cost = (codes_b != ord(ch)).astype(np.int64)
        tmp = np.empty_like(row)
        tmp[0] = i
        tmp[1:] = np.minimum(row[1:] + 1, row[:-1] + cost)
        row = np.minimum.accumulate(tmp - steps) + steps
    return float(row[-1]) / len(b)

"""The evaluation documents as files: ``.pdf`` names become one page per paragraph (CJK text in the
PDF base-14 CJK fonts), the rest UTF-8 text."""

from __future__ import annotations

import re

from .documents import DOCUMENTS

_CJK = re.compile(r"[\u3400-\u9fff\uac00-\ud7af]")


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split(" "):
        if len(line) + len(word) + 1 > width and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def pdf(paragraphs: list[str]) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for paragraph in paragraphs:
        page = doc.new_page()
        hangul = re.search(r"[\uac00-\ud7af]", paragraph)
        cjk = _CJK.search(paragraph)
        font = "korea" if hangul else "china-s" if cjk else "helv"
        width = 40 if cjk else 90
        for i, line in enumerate(_wrap(paragraph, width)):
            page.insert_text((72, 72 + 16 * i), line, fontname=font, fontsize=11)
    return bytes(doc.tobytes())


def files(documents: dict[str, tuple[str, list[str]]] = DOCUMENTS) -> dict[str, tuple[str, bytes]]:
    """``key -> (filename, bytes)``."""
    out = {}
    for key, (filename, paragraphs) in documents.items():
        data = pdf(paragraphs) if filename.endswith(".pdf") else "\n\n".join(paragraphs).encode()
        out[key] = (filename, data)
    return out

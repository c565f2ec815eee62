"""A table's caption found beside it: a paragraph styled as a caption (Word's ``Caption``, an ODF
caption or ``Table`` style, a numbered ``text:sequence``) or reading ``Table 3: …`` or a units
note (``单位：万元``, ``Units: EUR``), in the languages we index, directly before or after a table
becomes the table's caption (``Block.caption``), which the chunker repeats above the header in
every chunk of the table.

A caption paragraph between two tables goes to the table after it (captions above tables are the
common convention); a table takes at most one caption paragraph, before one after it. A paragraph
longer than ``MAX_CAPTION_CHARS`` is body text, whatever its style, and so is a sentence that
starts with a table's number (``Table 2 shows …``: a lower-case word after the number).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from ultimate_rag.domain.models import Block

from .tables import CAPTION_JOIN, merge_locator

MAX_CAPTION_CHARS = 300
TABLE_CAPTION = re.compile(
    r"^\s*(?:table|tab\.|tabelle|tableau|tabla|tabella|tabel|tabela|таблица|表格?|표)\s*"
    r"(?:[0-9]+|[IVXLC]+|[一二三四五六七八九十百]+)(?:[.\-–][0-9]+)*(?:\s*[:.：．\-–—]|\s+(?=(?-i:[^\sa-z]))|$)",
    re.IGNORECASE)
UNITS_NOTE = re.compile(r"^\s*(?:单位|單位|단위|units?|einheit|unité|unidad)\s*[:：]", re.IGNORECASE)
_FIGURE = re.compile(r"^\s*(?:figure|fig\.|image|photo|chart|diagram|图|圖|그림|abbildung|abb\.)\s*\d", re.IGNORECASE)


def is_table_caption(text: str, styled: bool = False) -> bool:
    """``text`` reads as a table's caption (``styled``: its paragraph has a caption style)."""
    text = text.strip()
    if not text or len(text) > MAX_CAPTION_CHARS:
        return False
    return bool(TABLE_CAPTION.match(text) or UNITS_NOTE.match(text)) or (styled and not _FIGURE.match(text))


def attach_captions(blocks: Sequence[Block], styled: Collection[int] = ()) -> list[Block]:
    """``blocks`` with each caption paragraph directly before or after a table moved into that
    table's caption (``styled``: indexes of the paragraphs whose style marks a caption)."""
    out: list[Block] = []
    captioned: set[int] = set()  # positions in ``out`` of tables that took a caption paragraph
    i = 0
    while i < len(blocks):
        block = blocks[i]
        if block.kind == "paragraph" and is_table_caption(block.text, i in styled):
            after = blocks[i + 1] if i + 1 < len(blocks) else None
            if after is not None and after.kind == "table":
                out.append(_captioned(after, block))
                captioned.add(len(out) - 1)
                i += 2
                continue
            if out and out[-1].kind == "table" and len(out) - 1 not in captioned:
                out[-1] = _captioned(out[-1], block)
                captioned.add(len(out) - 1)
                i += 1
                continue
        out.append(block)
        i += 1
    return out


def _captioned(table: Block, caption: Block) -> Block:
    text = " ".join(caption.text.split())
    return replace(table, caption=CAPTION_JOIN.join(t for t in (text, table.caption) if t),
                   locator=merge_locator(table.locator, caption.locator))

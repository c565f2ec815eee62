"""Text every parser hands on is made storable and readable here, in one place.

PostgreSQL text cannot hold NUL, and control characters, unpaired surrogates and noncharacters
are never content: a PDF font without a Unicode map, a legacy file or a broken converter puts
them in. They are removed from block texts and captions, asset descriptions and metadata strings; vertical
tab, form feed and NEL become line breaks (they separate lines or pages; inside a word they are
glyph codes and go), CR LF and CR become LF.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ultimate_rag.domain.models import ParsedDocument

_BREAKS = "\x0b\x0c\x85"
# C0 controls except tab and line feed (CR is normalised first), DEL and C1 controls except NEL,
# surrogates (in a Python str every one is unpaired), and the Unicode noncharacters.
_NONCHARACTERS = "".join(f"\\U{plane:04X}FFFE\\U{plane:04X}FFFF" for plane in range(0x11))
_REMOVE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufdd0-\ufdef" + _NONCHARACTERS + "]")
_BREAK = re.compile(f"[{_BREAKS}]")
# Between two letters a VT or FF is no line or page break but a glyph code (TeX's ff and fi
# ligatures without a Unicode map): it goes, without splitting the word.
_IN_WORD = re.compile(r"(?<=\w)[\x0b\x0c](?=\w)")


def clean_text(text: str) -> str:
    """``text`` without characters that are never content (see the module docstring)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _BREAK.sub("\n", _IN_WORD.sub("", text))
    return _REMOVE.sub("", text)


def clean_value(value: Any) -> Any:
    """Strings inside metadata (dicts, lists, tuples) cleaned; other values as they are."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(clean_value(v) for v in value)
    return value


def sanitize_parsed(parsed: ParsedDocument) -> ParsedDocument:
    """The parsed document with clean block texts, asset descriptions and metadata. A text block
    left empty is dropped; a figure block stays (it stands for its image)."""
    blocks = []
    for block in parsed.blocks:
        text, caption = clean_text(block.text), clean_text(block.caption)
        if text.strip() or block.asset_ids:
            blocks.append(block if (text, caption) == (block.text, block.caption)
                          else replace(block, text=text, caption=caption))
    assets = tuple(a if (d := clean_text(a.description)) == a.description else replace(a, description=d)
                   for a in parsed.assets)
    return replace(parsed, blocks=tuple(blocks), assets=assets, metadata=clean_value(parsed.metadata))

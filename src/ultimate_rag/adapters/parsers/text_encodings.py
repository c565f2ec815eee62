"""Text encodings that announce themselves without a byte-order mark, and those no decoder here
reads: UTF-32 and UTF-16 by where their NUL bytes fall, 7-bit ISO-2022 (Korean, Japanese) by its
escape sequences; EUC-TW and ISO-2022-CN are recognised so that a refusal can name them."""

from __future__ import annotations

import codecs
import re

SAMPLE_BYTES = 64 * 1024
# 7-bit ISO-2022 text announces its character sets with escape sequences (RFC 1557, RFC 1468)
_ISO2022 = ((b"\x1b$)C", "iso2022_kr"), (b"\x1b$B", "iso2022_jp_2"), (b"\x1b$@", "iso2022_jp_2"),
            (b"\x1b$(D", "iso2022_jp_2"), (b"\x1b(J", "iso2022_jp_2"), (b"\x1b$A", "iso2022_jp_2"),
            (b"\x1b$(C", "iso2022_jp_2"))
# EUC-TW: CNS 11643 plane 1 as two bytes A1-FE; planes 2-16 as SS2 (8E), the plane (A1-B0), two bytes
_EUC_TW_PLANE = re.compile(rb"\x8e[\xa2-\xb0][\xa1-\xfe][\xa1-\xfe]")
_EUC_TW_BYTES = re.compile(rb"(?:[\x00-\x7f]|[\xa1-\xfe][\xa1-\xfe]|\x8e[\xa1-\xb0][\xa1-\xfe][\xa1-\xfe])*")
# ISO-2022-CN (RFC 1922): Chinese in 7 bits; Python has no decoder for it
ISO2022_CN_ESCAPES = (b"\x1b$)A", b"\x1b$)G", b"\x1b$*H", b"\x1b$)E")


def sniff_encoding(head: bytes) -> str | None:
    """An encoding the bytes announce without a byte-order mark: UTF-32 or UTF-16 by where their
    NUL bytes fall (text in a Latin or Cyrillic script has one in every other byte), or 7-bit
    ISO-2022 (Korean, Japanese) by its escape sequences. None when they announce none."""
    if b"\x00" in head:
        return _wide_encoding(head)
    if b"\x1b" in head and max(head[:4096]) < 0x80:
        for escape, name in _ISO2022:
            if escape in head:
                return name
    return None


def _wide_encoding(head: bytes) -> str | None:
    sample = head[:4096]
    sample = sample[:len(sample) - len(sample) % 4]
    if len(sample) < 8:
        return None

    def zeros(offset: int, step: int) -> float:
        part = sample[offset::step]
        return part.count(0) / len(part)

    if zeros(2, 4) > 0.98 and zeros(3, 4) > 0.98 and zeros(0, 4) < 0.2:
        candidates = ["utf-32-le"]
    elif zeros(0, 4) > 0.98 and zeros(1, 4) > 0.98 and zeros(3, 4) < 0.2:
        candidates = ["utf-32-be"]
    elif zeros(1, 2) > 0.3 and zeros(0, 2) < 0.02:
        candidates = ["utf-16-le"]
    elif zeros(0, 2) > 0.3 and zeros(1, 2) < 0.02:
        candidates = ["utf-16-be"]
    else:
        return None
    for name in candidates:
        try:
            codecs.getincrementaldecoder(name)().decode(sample, final=False)
        except UnicodeDecodeError:
            continue
        return name
    return None


def looks_like_euc_tw(content: bytes) -> bool:
    """EUC-TW (CNS 11643), which no decoder here reads and which others take for mojibake (cp949
    reads its SS2 sequences as Hangul): two sequences or more of another plane (``8E A2-B0 xx xx``)
    and every byte of the sample fitting EUC-TW's grammar."""
    head = content[:SAMPLE_BYTES]
    if len(_EUC_TW_PLANE.findall(head)) < 2:
        return False
    cut = len(head) if len(content) <= len(head) else max(0, len(head) - 3)  # a sequence may straddle the end
    valid = _EUC_TW_BYTES.match(head)
    return valid is not None and valid.end() >= cut

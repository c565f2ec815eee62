"""Deduplication rules (SPEC §8, seed 004): what counts as the same text, how near-duplicates are
found (MinHash signatures split into LSH bands) and judged, and which of two documents is newer.
Pure functions; the hashing library is an adapter detail (``services/dedup.py``)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from .models import OlderTwin, ParsedDocument

NUM_PERM = 128
BANDS = 32  # 32 bands x 4 rows: a pair at Jaccard 0.5 shares a band with ~87 % chance, at 0.8 ~100 %
ROWS = NUM_PERM // BANDS

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"\w+")


class DedupMode(StrEnum):
    OFF = "off"
    EXACT = "exact"
    NEAR = "near"


class Verdict(StrEnum):
    IDENTICAL = "identical"  # identical content and the same title
    SIMILAR = "similar"  # above the similarity threshold (or the same content under another title)


def normalize(text: str) -> str:
    """What "the same text" means: Unicode-compatible forms folded, case folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_hash(text: str, asset_hashes: tuple[str, ...] = ()) -> str:
    """The exact fingerprint: the normalized text and, when there are any, the assets' own hashes
    (so two documents with the same words and different images are not identical). Without assets
    it is the text's hash alone, as recorded before assets counted."""
    base = normalize(text)
    if asset_hashes:
        base += "\n\x00assets:" + ",".join(asset_hashes)
    return hashlib.sha256(base.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Content:
    """What deduplication compares: the document's own text and its assets' bytes (as sha256)."""

    text: str
    asset_hashes: tuple[str, ...] = ()

    @property
    def amount(self) -> int:
        """Non-space characters of the normalized text: what "enough content to compare" counts."""
        return sum(map(len, normalize(self.text).split()))  # split() cuts at exactly what isspace() is

    def fingerprint(self) -> str:
        return content_hash(self.text, self.asset_hashes)


def document_content(parsed: ParsedDocument) -> Content:
    """The parsed document as dedup sees it. Figure blocks are left out of the text: their text is
    a placeholder the parsers write (``[Image on page 1]``, or an alt text / caption / generated
    description around it), the same for unrelated images; the images count by their bytes instead.
    Assets are taken in document order."""
    text = "\n\n".join(b.shown for b in parsed.blocks if b.kind != "figure")
    return Content(text, tuple(hashlib.sha256(a.data).hexdigest() for a in parsed.assets))


def shingles(text: str, *, word_n: int = 3, char_n: int = 3) -> set[str]:
    """Word n-grams for space-separated scripts and character n-grams for Chinese, Japanese and
    Korean runs (which have no spaces, or syllable blocks too coarse for words), so a Chinese
    document and an English one are compared on comparable units."""
    norm = normalize(text)
    out: set[str] = set()
    for run in _CJK.findall(norm):
        compact = run.replace(" ", "")
        if len(compact) <= char_n:
            out.add(compact)
        out.update(compact[i:i + char_n] for i in range(len(compact) - char_n + 1))
    words = _WORD.findall(_CJK.sub(" ", norm))
    if 0 < len(words) < word_n:
        out.add(" ".join(words))
    out.update(" ".join(words[i:i + word_n]) for i in range(len(words) - word_n + 1))
    return out


def bands(hashvalues: list[int]) -> list[tuple[int, int]]:
    """(band index, band hash) pairs: documents sharing any band are candidates."""
    if len(hashvalues) != NUM_PERM:
        raise ValueError(f"expected {NUM_PERM} hash values")
    out = []
    for b in range(BANDS):
        chunk = ",".join(str(v) for v in hashvalues[b * ROWS:(b + 1) * ROWS]).encode()
        out.append((b, int.from_bytes(hashlib.blake2b(chunk, digest_size=8).digest(), "big", signed=True)))
    return out


def estimated_jaccard(a: list[int], b: list[int]) -> float:
    return sum(1 for x, y in zip(a, b, strict=True) if x == y) / len(a)


@dataclass(frozen=True)
class Candidate:
    document_id: UUID
    filename: str
    content_hash: str | None
    hashvalues: list[int] | None
    created_at: datetime
    source: dict[str, Any]


@dataclass(frozen=True)
class Match:
    document_id: UUID
    verdict: Verdict
    score: float
    method: str  # "exact" | "minhash"


@dataclass(frozen=True)
class Decision:
    """Deduplication's outcome for the document being processed, as data: nothing to do; this
    document is the older twin, OUTDATED already (nothing is embedded); or ``outdate``, the older
    twin that this document's READY commit makes OUTDATED in the same transaction."""

    outdated_self: bool = False
    outdate: OlderTwin | None = None
    verdict: dict[str, Any] | None = None  # the verdict recorded on this document (None: not judged)
    entered: bool = False  # the stage entry handed to the judging was written with the verdict


def judge(*, filename: str, text_hash: str, hashvalues: list[int] | None, candidates: list[Candidate],
          mode: DedupMode, threshold: float) -> Match | None:
    """The best match among candidates, or None: an exact one first, then the most similar."""
    if mode == DedupMode.OFF:
        return None
    for c in candidates:
        if c.content_hash == text_hash:
            same_title = _title(c.filename) == _title(filename)
            return Match(c.document_id, Verdict.IDENTICAL if same_title else Verdict.SIMILAR, 1.0, "exact")
    if mode != DedupMode.NEAR or hashvalues is None:
        return None
    scored = [(estimated_jaccard(hashvalues, c.hashvalues), c) for c in candidates if c.hashvalues]
    best = max(scored, key=lambda sc: (sc[0], str(sc[1].document_id)), default=None)
    if best is None or best[0] < threshold:
        return None
    return Match(best[1].document_id, Verdict.SIMILAR, round(best[0], 4), "minhash")


def modified_at(created_at: datetime, source: dict[str, Any]) -> datetime:
    """"Newer" is decided by the source's modification time when known (connectors record it),
    else by upload time."""
    raw = source.get("last_modified") if source else None
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=created_at.tzinfo)
        except ValueError:
            pass
    return created_at


def is_newer(a: tuple[datetime, dict[str, Any], UUID], b: tuple[datetime, dict[str, Any], UUID]) -> bool:
    """Whether document ``a`` (created_at, source, id) is newer than ``b``; ties go by creation, then id."""
    return (modified_at(a[0], a[1]), a[0], str(a[2])) > (modified_at(b[0], b[1]), b[0], str(b[2]))


def _title(filename: str) -> str:
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    return normalize(stem)

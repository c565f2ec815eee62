"""Decide what a file is from its bytes and extension, and decode text files.

A client's Content-Type is never trusted on its own: magic bytes say whether content is a known
binary format, and a text check (no NUL bytes, a plausible encoding, few control characters)
keeps binary garbage that merely carries a ``.txt`` name out of the text parsers.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from functools import lru_cache

import charset_normalizer
import filetype

from ultimate_rag.domain.errors import InvalidDocumentError

from .text_encodings import ISO2022_CN_ESCAPES, SAMPLE_BYTES, looks_like_euc_tw, sniff_encoding

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mdx"})
TEXT_EXTENSIONS = frozenset({".txt", ".text", ".log", ".rst", ""})
OCTET_STREAM = "application/octet-stream"

_SAMPLE_BYTES = SAMPLE_BYTES
_MAX_CONTROL_RATIO = 0.02
# Control characters that real text files contain (tabs, form feeds, ANSI colour codes in logs).
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b")
# Unicode's control (Cc), surrogate (Cs) and private-use (Co) code points, fixed ranges since
# Unicode 2.0, less the allowed controls: one regex pass instead of a category lookup per character
# (tests/unit/test_detect.py checks it against unicodedata for every code point)
_CONTROL = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f\ud800-\udfff\ue000-\uf8ff"
                      "\U000f0000-\U000ffffd\U00100000-\U0010fffd]")
# Formats whose files may be pure ASCII: their magic wins even when the content reads as text.
# Other magics are short ("BM", "ID3", "MZ") and would misfire on ordinary prose.
_TEXTUAL_FORMATS = frozenset({"application/pdf", "application/rtf", "application/postscript"})
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_MIME_BY_KIND = {"markdown": "text/markdown", "text": "text/plain"}
_OOXML = "application/vnd.openxmlformats-officedocument."
_OOXML_PARTS = (("word/document.xml", _OOXML + "wordprocessingml.document"),
                ("ppt/presentation.xml", _OOXML + "presentationml.presentation"),
                ("xl/workbook.xml", _OOXML + "spreadsheetml.sheet"))
_PACKAGE_MIMES = frozenset({"application/epub+zip", "application/vnd.oasis.opendocument.text",
                            "application/vnd.oasis.opendocument.spreadsheet",
                            "application/vnd.oasis.opendocument.presentation"})
# signatures that are a zip archive underneath: their real type is read from the inner parts
_ZIP_FAMILY = frozenset({"application/zip", *(mime for _, mime in _OOXML_PARTS), *_PACKAGE_MIMES})


def detect_kind(content: bytes, extension: str) -> str:
    """Return "markdown", "text", "binary:<mime>" or "unknown" (text with an unsupported extension).

    Binary content without a recognised signature is "binary:application/octet-stream".
    """
    ext = extension.lower().strip()
    if ext and not ext.startswith("."):
        ext = "." + ext
    head = content[:_SAMPLE_BYTES]
    match = filetype.guess(head) if head else None
    textual = _looks_like_text(head)
    if match is not None and (not textual or match.mime in _TEXTUAL_FORMATS):
        if match.mime in _ZIP_FAMILY:
            return f"binary:{_zip_kind(content) or match.mime}"
        return f"binary:{match.mime}"
    if not textual:
        return f"binary:{OCTET_STREAM}"
    if ext in MARKDOWN_EXTENSIONS:
        return "markdown"
    if ext in TEXT_EXTENSIONS:
        return "text"
    return "unknown"


def _zip_kind(content: bytes) -> str | None:
    """The format of a zip-based document, from its inner parts (the signature check only reads the
    first entry, and calls many of them plain zip): XPS (Microsoft's and the ECMA OpenXPS) has a
    fixed-document sequence (``*.fdseq``) named in its relationships; DOCX, PPTX and XLSX have
    their main part (``word/document.xml``, ``ppt/presentation.xml``, ``xl/workbook.xml``);
    EPUB and OpenDocument name their type in the ``mimetype`` entry. None when nothing says."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = archive.namelist()
            relations = mimetype = b""
            if "_rels/.rels" in names:
                with archive.open("_rels/.rels") as rels:
                    relations = rels.read(_SAMPLE_BYTES)
            if "mimetype" in names:
                with archive.open("mimetype") as entry:
                    mimetype = entry.read(128).strip()
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, NotImplementedError, RuntimeError):
        return None
    if b"openxps.org" in relations:
        return "application/oxps"
    if b"/xps/" in relations or any(name.lower().endswith(".fdseq") for name in names):
        return "application/vnd.ms-xpsdocument"
    present = set(names)
    for part, mime in _OOXML_PARTS:
        if part in present and "[Content_Types].xml" in present:
            return mime
    if mimetype.decode("ascii", "replace") in _PACKAGE_MIMES:
        return mimetype.decode("ascii")
    return None


def mime_for_kind(kind: str) -> str:
    """The MIME type to record for a detected kind (content-derived, not the client's claim)."""
    if kind.startswith("binary:"):
        return kind.removeprefix("binary:")
    return _MIME_BY_KIND.get(kind, OCTET_STREAM)


def decode_text(content: bytes) -> tuple[str, str]:
    """Decode text bytes to (text with "\\n" newlines and no NUL characters, encoding name).

    Order: byte-order mark, strict UTF-8 (the common case, no guessing), then charset-normalizer.
    """
    if not content:
        return "", "utf-8"
    encoding = _bom_encoding(content)
    sniffed = None if encoding else sniff_encoding(content[:_SAMPLE_BYTES])
    if encoding is not None:
        bom_len = 4 if encoding.startswith("utf-32") else 3 if encoding == "utf-8" else 2
        text = _strict_decode(content[bom_len:], encoding)
        name = "utf-8-sig" if encoding == "utf-8" else encoding
    elif sniffed is not None:
        text, name = _strict_decode(content, sniffed), sniffed
    else:
        try:
            text, name = content.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            name = _guess_encoding(content)
            text = _strict_decode(content, name)
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    # PostgreSQL text cannot hold NUL; a stray one past the sampled head becomes U+FFFD.
    return text.replace("\x00", "\ufffd"), name


def _strict_decode(content: bytes, encoding: str) -> str:
    try:
        return content.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise InvalidDocumentError(
            f"the file is not readable text (it does not decode as {encoding})") from exc


def _guess_encoding(content: bytes) -> str:
    name = _best_guess(content)
    if name is None:
        raise InvalidDocumentError("the file is not readable text (no plausible character encoding)")
    return name


def _best_guess(content: bytes) -> str | None:
    """charset-normalizer's best plausible encoding (BOM-less UTF-16/32 needs NUL bytes); none
    for EUC-TW, which it would misread."""
    if looks_like_euc_tw(content):
        return None
    has_nul = b"\x00" in content
    for match in charset_normalizer.from_bytes(content):
        if has_nul or not match.encoding.startswith(("utf_16", "utf_32")):
            return _prefer_western(content, match.encoding)
    return None


def _bom_encoding(content: bytes) -> str | None:
    for bom, name in _BOMS:
        if content.startswith(bom):
            return name
    return None


def _looks_like_text(head: bytes) -> bool:
    if not head:
        return True
    encoding = _bom_encoding(head) or sniff_encoding(head)
    if encoding is None and (b"\x00" in head or any(escape in head for escape in ISO2022_CN_ESCAPES)):
        return False
    sample = _decode_sample(head, encoding)
    if sample is None:
        return False
    controls = len(_CONTROL.findall(sample))
    return controls <= _MAX_CONTROL_RATIO * max(len(sample), 1)


def _decode_sample(head: bytes, encoding: str | None) -> str | None:
    """Decode a prefix that may end mid-character; None when no encoding fits."""
    try:
        if encoding is not None:
            return codecs.getincrementaldecoder(encoding)().decode(head, final=False)
        return codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        pass
    name = _best_guess(head)
    if name is None:
        return None
    try:
        return codecs.getincrementaldecoder(name)(errors="replace").decode(head, final=False)
    except LookupError:
        return None


def _prefer_western(content: bytes, guess: str) -> str:
    """Prefer Windows-1252 over other single-byte guesses when the text reads as Western European.

    charset-normalizer often labels short Latin-1 text as a Baltic or Central European code page,
    which silently turns "è" into "č". Cyrillic/Greek text decoded as cp1252 is almost all
    non-ASCII letters, and Central European text shows symbols wedged inside words; both keep
    the original guess. EBCDIC-style guesses are implausible for files that read as ASCII.
    A multi-byte (CJK) guess whose non-ASCII characters are all isolated is a Latin text whose
    accented letters were glued to their neighbours; real CJK text has runs of characters.
    """
    if not _is_single_byte(guess) and not _isolated_multibyte(content[:_SAMPLE_BYTES], guess):
        return guess
    try:
        text = content.decode("cp1252")
    except UnicodeDecodeError:
        return guess
    text = text[:_SAMPLE_BYTES]
    letters = non_ascii = wedged = 0
    for i, ch in enumerate(text):
        if ch.isalpha():
            letters += 1
            non_ascii += ord(ch) > 127
        elif ord(ch) > 127 and 0 < i < len(text) - 1 and text[i - 1].isalpha() and text[i + 1].isalpha():
            wedged += 1
    if wedged == 0 and (non_ascii <= 0.5 * letters or not _is_ascii_compatible(guess)):
        return "cp1252"
    return guess


def _isolated_multibyte(sample: bytes, guess: str) -> bool:
    if guess.replace("-", "_").lower().startswith("utf"):
        return False
    try:
        text = codecs.getincrementaldecoder(guess)(errors="replace").decode(sample, final=False)
    except LookupError:
        return False
    runs = re.findall(r"[^\x00-\x7f]+", text)
    return bool(runs) and all(len(run) == 1 for run in runs)


@lru_cache(maxsize=64)
def _is_single_byte(encoding: str) -> bool:
    try:
        return len(bytes(range(256)).decode(encoding, errors="replace")) == 256
    except LookupError:
        return False


@lru_cache(maxsize=64)
def _is_ascii_compatible(encoding: str) -> bool:
    printable = bytes(range(0x20, 0x7F))
    return printable.decode(encoding, errors="replace") == printable.decode("ascii")

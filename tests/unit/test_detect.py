"""Format detection from content and decoding of legacy encodings."""

from __future__ import annotations

import codecs
import random

import pytest

from ultimate_rag.adapters.parsers.detect import decode_text, detect_kind, mime_for_kind
from ultimate_rag.domain.errors import InvalidDocumentError

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + bytes(64)
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\nstream\n\x00\x01\x02\nendstream\n"
ZIP = b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00" + bytes(64)

CHINESE = "自然语言处理是人工智能的一个重要分支。它研究如何让计算机理解和生成人类语言。检索增强生成结合了搜索与大模型。"
KOREAN = "자연어 처리는 인공지능의 중요한 분야입니다. 컴퓨터가 인간의 언어를 이해하고 생성하는 방법을 연구합니다."
JAPANESE = "自然言語処理は人工知能の重要な分野です。コンピュータが人間の言語を理解する方法を研究します。"
FRENCH = "Le café était très animé ce matin-là. Les élèves déjà présents parlaient de leurs vacances à Noël."
GERMAN = "Der Bär läuft über die Straße. Schöne Grüße aus München!"


def garbage(size: int = 4096, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.mark.parametrize(("content", "extension", "kind"), [
    (b"# Title\n\nHello", ".md", "markdown"),
    (b"# Title\n\nHello", ".MARKDOWN", "markdown"),
    (b"# Title\n\nHello", ".mdown", "markdown"),
    (b"<Intro>\n\nHello\n\n</Intro>", ".mdx", "markdown"),
    (b"plain words", ".txt", "text"),
    (b"plain words", ".text", "text"),
    (b"2026-01-01 INFO started\n", ".log", "text"),
    (b"Title\n=====\n", ".rst", "text"),
    (b"no extension at all", "", "text"),
    (b"", ".md", "markdown"),
    (b"", ".txt", "text"),
    (b"a,b\n1,2\n", ".csv", "unknown"),
    (b"whatever", ".xyz", "unknown"),
])
def test_text_kinds_follow_extension(content: bytes, extension: str, kind: str) -> None:
    assert detect_kind(content, extension) == kind


@pytest.mark.parametrize(("content", "mime"), [
    (PNG, "image/png"),
    (PDF, "application/pdf"),
    (ZIP, "application/zip"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(32), "image/jpeg"),
    (b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + bytes(32), "image/gif"),
])
@pytest.mark.parametrize("extension", [".txt", ".md", ""])
def test_binary_signatures_win_over_extension(content: bytes, mime: str, extension: str) -> None:
    assert detect_kind(content, extension) == f"binary:{mime}"


def test_ascii_only_pdf_is_still_pdf() -> None:
    assert detect_kind(b"%PDF-1.4\n1 0 obj\n<< >>\nendobj\ntrailer\n%%EOF\n", ".md") == "binary:application/pdf"


def test_short_magic_does_not_misfire_on_prose() -> None:
    # "BM" is the BMP signature and "ID3" the MP3 one; ordinary text starting with them is text.
    assert detect_kind(b"BMW is a car maker.\n", ".txt") == "text"
    assert detect_kind(b"ID3 tags describe songs.\n", ".md") == "markdown"


def test_random_garbage_is_binary() -> None:
    assert detect_kind(garbage(), ".txt") == "binary:application/octet-stream"


def test_garbage_without_nul_bytes_is_binary() -> None:
    data = garbage().replace(b"\x00", b"\x01")
    assert detect_kind(data, ".txt") == "binary:application/octet-stream"
    assert detect_kind(bytes(range(1, 32)) * 50, ".txt") == "binary:application/octet-stream"


def test_nul_bytes_make_content_binary() -> None:
    assert detect_kind(b"hello\x00world" * 10, ".txt") == "binary:application/octet-stream"


def test_ansi_colour_codes_in_logs_are_text() -> None:
    log = b"\x1b[32mINFO\x1b[0m service started\n" * 20
    assert detect_kind(log, ".log") == "text"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_bom_is_text(encoding: str) -> None:
    bom = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}.get(encoding, b"")
    content = bom + f"Hello 世界\r\n{KOREAN}".encode(encoding)
    assert detect_kind(content, ".txt") == "text"
    text, name = decode_text(content)
    assert text == f"Hello 世界\n{KOREAN}"
    assert name.startswith("utf-16")


def test_utf8_with_bom() -> None:
    text, name = decode_text(codecs.BOM_UTF8 + "héllo\r\nwörld".encode())
    assert (text, name) == ("héllo\nwörld", "utf-8-sig")


def test_utf8_fast_path_and_newlines() -> None:
    assert decode_text(b"a\r\nb\rc\n") == ("a\nb\nc\n", "utf-8")
    assert decode_text(b"") == ("", "utf-8")
    assert decode_text(b"a\x00b") == ("a\ufffdb", "utf-8")


@pytest.mark.parametrize(("sample", "encoding"), [
    (CHINESE, "gb18030"),
    (CHINESE, "gbk"),
    ("使用Python开发应用程序。" + CHINESE, "gb18030"),
    (KOREAN, "euc-kr"),
    (KOREAN, "cp949"),
    (JAPANESE, "shift_jis"),
    (FRENCH, "latin-1"),
    (GERMAN, "latin-1"),
    ("Ça va? Très bien, merci.", "latin-1"),
    (FRENCH, "cp1252"),
])
def test_legacy_encodings_decode_correctly(sample: str, encoding: str) -> None:
    content = sample.encode(encoding)
    assert detect_kind(content, ".txt") == "text"
    text, name = decode_text(content)
    assert text == sample, name
    assert text.encode(name) == content


def test_garbage_does_not_decode() -> None:
    with pytest.raises(InvalidDocumentError, match="not readable text"):
        decode_text(garbage())


def test_mime_for_kind() -> None:
    assert mime_for_kind("markdown") == "text/markdown"
    assert mime_for_kind("text") == "text/plain"
    assert mime_for_kind("binary:application/pdf") == "application/pdf"
    assert mime_for_kind("unknown") == "application/octet-stream"


def xps_package(*, openxps: bool = False) -> bytes:
    """A minimal XPS package as Windows writes one: the relationships name the fixed-document
    sequence (``FixedDocSeq.fdseq``) that holds the documents and their pages."""
    import io
    import zipfile

    ns = "http://schemas.openxps.org/oxps/v1.0" if openxps else "http://schemas.microsoft.com/xps/2005/06"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/content-types"><Default Extension="fdseq" ContentType="application/'
                         'vnd.ms-package.xps-fixeddocumentsequence+xml"/></Types>')
        archive.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.'
                         f'org/package/2006/relationships"><Relationship Type="{ns}/fixedrepresentation" '
                         'Target="/FixedDocSeq.fdseq" Id="R0"/></Relationships>')
        archive.writestr("FixedDocSeq.fdseq", "<FixedDocumentSequence/>")
        archive.writestr("Documents/1/FixedDoc.fdoc", "<FixedDocument/>")
        archive.writestr("Documents/1/Pages/1.fpage", "<FixedPage/>")
    return out.getvalue()


def test_xps_is_detected_as_xps_not_zip() -> None:
    assert detect_kind(xps_package(), ".xps") == "binary:application/vnd.ms-xpsdocument"
    assert detect_kind(xps_package(openxps=True), ".oxps") == "binary:application/oxps"
    assert mime_for_kind(detect_kind(xps_package(), ".xps")) == "application/vnd.ms-xpsdocument"
    assert detect_kind(ZIP, ".zip") == "binary:application/zip"  # a broken zip stays a zip


def test_the_control_pattern_is_unicodes_control_surrogate_and_private_use_categories() -> None:
    """The one-pass pattern the text check counts with, against unicodedata, every code point."""
    import sys
    import unicodedata

    from ultimate_rag.adapters.parsers.detect import _ALLOWED_CONTROLS, _CONTROL

    expected = [cp for cp in range(sys.maxunicode + 1)
                if chr(cp) not in _ALLOWED_CONTROLS and unicodedata.category(chr(cp)) in ("Cc", "Cs", "Co")]
    everything = "".join(chr(cp) for cp in range(sys.maxunicode + 1))
    assert [ord(ch) for ch in _CONTROL.findall(everything)] == expected


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_wide_text_without_a_byte_order_mark_is_text(encoding: str) -> None:
    """Windows tools write UTF-16LE without a BOM; it was refused as "binary data"."""
    text = f"{FRENCH}\n{GERMAN}\n{KOREAN}\n"
    data = text.encode(encoding)
    assert detect_kind(data, ".txt") == "text"
    assert decode_text(data) == (text, encoding)


def test_iso_2022_kr_and_jp_text_is_read() -> None:
    korean = f"{KOREAN}\n" * 3
    data = korean.encode("iso2022_kr")
    assert b"\x0e" in data and detect_kind(data, ".txt") == "text"
    assert decode_text(data) == (korean, "iso2022_kr")
    japanese = f"{JAPANESE}\n"
    assert decode_text(japanese.encode("iso2022_jp"))[0] == japanese


def test_binary_with_scattered_nul_bytes_is_not_taken_for_utf16() -> None:
    assert detect_kind(b"ab\x00cdefgh\x00ij" * 100, ".txt") == "binary:application/octet-stream"

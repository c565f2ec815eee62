"""Parser resolution from content: unknown or disguised formats are refused before storage."""

from __future__ import annotations

import random

import pytest

from ultimate_rag.adapters.parsers import (
    MarkdownParser,
    ParserRegistry,
    PlainTextParser,
    default_registry,
)
from ultimate_rag.adapters.parsers import (
    registry as registry_module,
)
from ultimate_rag.domain.errors import InvalidDocumentError, UnsupportedFormatError
from ultimate_rag.domain.models import DocumentSource

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + bytes(64)
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"


def source(filename: str, content: bytes, mime: str = "text/plain") -> DocumentSource:
    return DocumentSource(None, filename, mime, content)


def test_resolves_markdown_and_text() -> None:
    registry = default_registry()
    assert isinstance(registry.resolve(source("a.md", b"# Hi")), MarkdownParser)
    assert isinstance(registry.resolve(source("a.txt", b"Hi")), PlainTextParser)
    assert isinstance(registry.resolve(source("README", b"Hi")), PlainTextParser)
    assert isinstance(registry.resolve(source("a.txt", "안녕하세요. 반갑습니다.".encode("euc-kr"))), PlainTextParser)
    assert registry.detect(source("a.md", b"# Hi")) == "markdown"


def test_png_named_txt_is_unsupported_even_with_text_content_type() -> None:
    with pytest.raises(UnsupportedFormatError) as info:
        default_registry().resolve(source("photo.txt", PNG, mime="text/plain"))
    assert info.value.message.startswith(
        "unsupported file format: content looks like image/png (extension .txt); supported formats: ")


def test_pdf_named_md_is_unsupported() -> None:
    with pytest.raises(UnsupportedFormatError, match="application/pdf"):
        default_registry().resolve(source("paper.md", PDF, mime="text/markdown"))


def test_random_garbage_named_txt_is_unsupported() -> None:
    garbage = random.Random(3).randbytes(2048)
    with pytest.raises(UnsupportedFormatError, match="binary data"):
        default_registry().resolve(source("notes.txt", garbage))


def test_unknown_extension_is_unsupported() -> None:
    with pytest.raises(UnsupportedFormatError) as info:
        default_registry().resolve(source("data.xyz", b"plain text"))
    assert info.value.message.startswith("unsupported file format: .xyz; supported formats: ")
    assert isinstance(info.value, InvalidDocumentError)  # permanent: never retried


def test_first_accepting_parser_wins_and_detection_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = registry_module.detect_kind  # type: ignore[attr-defined]  # imported there, not exported

    def counting(content: bytes, extension: str) -> str:
        calls.append(extension)
        return real(content, extension)

    monkeypatch.setattr(registry_module, "detect_kind", counting)
    second = PlainTextParser()
    registry = ParserRegistry([PlainTextParser(), second])
    assert registry.resolve(source("a.txt", b"x")) is registry.parsers[0]
    assert calls == [".txt"]


def test_registry_without_a_matching_parser() -> None:
    with pytest.raises(UnsupportedFormatError, match="markdown content"):
        ParserRegistry([PlainTextParser()]).resolve(source("a.md", b"# Hi"))


def test_refusal_lists_the_formats_of_the_registry_parsers() -> None:
    with pytest.raises(UnsupportedFormatError) as info:
        default_registry().resolve(source("slides.xyz", b"plain text"))
    supported = info.value.supported_formats
    assert {".pdf", ".docx", ".md", ".txt", ".html", ".csv", ".tsv"} <= set(supported)
    assert list(supported) == sorted(supported) and "" not in supported
    assert info.value.message.endswith("supported formats: " + ", ".join(supported))
    # the list is the registry's own: a registry with one parser lists only that parser's formats
    with pytest.raises(UnsupportedFormatError) as info:
        ParserRegistry([MarkdownParser()]).resolve(source("a.txt", b"Hi"))
    assert info.value.supported_formats == (".markdown", ".md", ".mdown", ".mdx")

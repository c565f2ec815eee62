"""Plain text up to ``INLINE_TEXT_MAX_BYTES`` is parsed in a thread; everything else built in,
and larger text, still goes to the isolated child (isolation.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.isolation import INLINE_TEXT_MAX_BYTES, ParseRunner
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource


def _source(name: str, content: bytes) -> DocumentSource:
    return DocumentSource(uuid.uuid4(), name, "", content)


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the parsers sent to a child (the child itself still runs)."""
    sent: list[str] = []
    original = ParseRunner._isolated

    async def recording(self: ParseRunner, name: str, source: DocumentSource, pump: Any) -> Any:
        sent.append(name)
        return await original(self, name, source, pump)

    monkeypatch.setattr(ParseRunner, "_isolated", recording)
    return sent


async def test_small_plain_text_parses_in_a_thread(children: list[str]) -> None:
    source = _source("notes.txt", "First paragraph.\n\n港口 and 항구.\n".encode())
    parser = default_registry().resolve(source)
    parsed = await ParseRunner().parse(parser, source)
    assert [b.text for b in parsed.blocks] == ["First paragraph.", "港口 and 항구."]
    assert children == []


async def test_large_plain_text_and_other_formats_go_to_the_child(children: list[str]) -> None:
    runner = ParseRunner()
    big = _source("big.txt", b"word " * (INLINE_TEXT_MAX_BYTES // 5 + 1))
    markdown = _source("guide.md", b"# Title\n\nBody text.\n")
    for source in (big, markdown):
        await runner.parse(default_registry().resolve(source), source)
    assert children == ["text", "markdown"]


async def test_the_inline_parse_keeps_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The text limit applies in the thread as in the child."""
    source = _source("notes.txt", b"x" * 200)
    parser = default_registry().resolve(source)
    runner = ParseRunner(ParseLimits(max_text_chars=100))
    with pytest.raises(InvalidDocumentError, match="more than the limit of 100"):
        await runner.parse(parser, source)


def test_isolation_off_or_a_foreign_parser_never_uses_the_child() -> None:
    source = _source("notes.txt", b"x" * (INLINE_TEXT_MAX_BYTES + 1))
    parser = default_registry().resolve(source)
    assert ParseRunner().runs_isolated(parser, source)
    assert not ParseRunner(isolate=False).runs_isolated(parser, source)

    class Foreign:
        name, version = "text", "1"

        def accepts(self, source: DocumentSource, detected_kind: str) -> bool:
            return True

        def parse(self, source: DocumentSource) -> Any:
            raise AssertionError("not called")

    assert not ParseRunner().runs_isolated(Foreign(), source)

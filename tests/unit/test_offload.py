"""Small CPU work of a job runs on the event loop, large work in a thread (offload.py): the
helper itself, the plain-text parse and the local object store's reads."""

from __future__ import annotations

import threading
from pathlib import Path
from uuid import uuid4

import pytest

from ultimate_rag import offload
from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.registry import default_registry
from ultimate_rag.adapters.storage.local import LocalObjectStorage
from ultimate_rag.domain.models import DocumentSource


def _where() -> int:
    return threading.get_ident()


async def test_small_work_runs_on_the_loop_and_large_work_in_a_thread() -> None:
    loop_thread = threading.get_ident()
    assert await offload.run_sized(offload.SMALL_WORK, _where) == loop_thread
    assert await offload.run_sized(offload.SMALL_WORK + 1, _where) != loop_thread

    def fails() -> None:
        raise ValueError("bad input")

    for size in (1, offload.SMALL_WORK + 1):  # an error is the caller's either way
        with pytest.raises(ValueError, match="bad input"):
            await offload.run_sized(size, fails)


async def test_a_small_text_file_is_parsed_on_the_loop_and_a_large_one_in_a_thread(monkeypatch) -> None:
    parser = default_registry().resolve(DocumentSource(uuid4(), "a.txt", "text/plain", b"x"))
    seen: list[int] = []
    real = type(parser).parse

    def spying(self, source):
        seen.append(threading.get_ident())
        return real(self, source)

    monkeypatch.setattr(type(parser), "parse", spying)
    runner = ParseRunner()
    small = b"The ferry leaves at nine.\n" * 10
    large = b"The ferry leaves at nine.\n" * (offload.SMALL_WORK // 20)
    for content in (small, large):
        parsed = await runner.parse(parser, DocumentSource(uuid4(), "a.txt", "text/plain", content))
        assert "".join(b.text for b in parsed.blocks).count("ferry") == content.count(b"ferry")
    assert seen[0] == threading.get_ident() and seen[1] != threading.get_ident()


async def test_the_local_store_reads_small_and_large_objects_alike(tmp_path: Path) -> None:
    storage = LocalObjectStorage(tmp_path)
    small, large = b"a" * 100, bytes(range(256)) * (offload.SMALL_WORK // 128)
    await storage.put("kb/doc/small.txt", small, "text/plain")
    await storage.put("kb/doc/large.bin", large, "application/octet-stream")
    assert await storage.get("kb/doc/small.txt") == small
    assert await storage.get("kb/doc/large.bin") == large

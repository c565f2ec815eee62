"""``ultimate-rag ingest`` against a real running server: a folder of mixed files, the command
SIGKILLed midway and run again (nothing duplicated, everything READY), then a third run that skips
what is unchanged, replaces a changed file in place and reports an unreadable one with its reason."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fitz
import pytest
from docx import Document as DocxDocument

from ultimate_rag.client import Client
from ultimate_rag.testing.eventually import eventually_sync
from ultimate_rag.testing.servers import Fault, FaultProxy

pytestmark = pytest.mark.acceptance


def cli(live, *args: str, url: str | None = None) -> list[str]:
    return [sys.executable, "-m", "ultimate_rag.cli", *args, "--url", url or live.url, "--key", live.admin_key]


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}, "PYTHONUNBUFFERED": "1"}


def make_folder(root: Path) -> list[str]:
    """Twelve documents of six formats (one in a subfolder), a hidden file, and a file no parser reads."""
    (root / "guides").mkdir(parents=True)
    for i in range(4):
        (root / f"note-{i}.md").write_text(f"# Note {i}\n\n## Part\n\nThe harbour log entry number {i}.\n")
    for i in range(2):
        (root / f"plain-{i}.txt").write_text(f"Plain text file {i} about anchors and ropes.\n")
    (root / "page.html").write_text("<html><head><title>Page</title></head><body><h1>Lighthouse</h1>"
                                    "<p>The lighthouse keeper writes the weather down every night.</p></body></html>")
    (root / "table.csv").write_text("ship,port\nAurora,Brest\nBoreas,Oslo\n")
    docx = DocxDocument()
    docx.add_heading("Knots", level=1)
    docx.add_paragraph("A bowline makes a fixed loop at the end of a rope.")
    docx.save(str(root / "guides" / "knots.docx"))
    for name, text in (("charts.pdf", "Nautical charts show depths in metres."),
                       ("flags.pdf", "Signal flags spell letters at sea.")):
        pdf = fitz.open()
        pdf.new_page().insert_text((72, 72), text)
        pdf.save(str(root / name))
    (root / "guides" / "notes.md").write_text("# Notes\n\nFirst version of the notes.\n")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "junk.bin").write_bytes(bytes(range(256)) * 8)
    return sorted(p.name for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")
                  and p.suffix != ".bin")


def documents(live, kb_id: str) -> list:
    with Client(live.url, live.admin_key) as rag:
        return list(rag.iter_documents(kb_id))


def test_ingest_killed_midway_resumes_without_duplicates_and_skips_unchanged_files(live, tmp_path) -> None:
    folder = tmp_path / "docs"
    names = make_folder(folder)
    kb_name = f"ingest-{os.getpid()}-{time.monotonic_ns()}"

    # 1. through a proxy that lets the first five requests through (find the knowledge base, create it,
    #    list its documents... and a few uploads) and then holds every request: kill the command there
    proxy = FaultProxy(live.url).start()
    proxy.inject(*[Fault()] * 6, *[Fault(stall=30)] * 20)
    first = subprocess.Popen(cli(live, "ingest", str(folder), "--kb", kb_name, "--create", "--exclude", "*.bin",
                                 "--concurrency", "1", url=proxy.url),
                             env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert first.stdout is not None
    try:
        def held() -> int:
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            return proxy.faulted

        # the seventh request is being held
        eventually_sync(held, lambda n: n >= 7, timeout=120, what="the command reached the held request")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        proxy.stop()
    output = first.stdout.read()
    assert first.returncode == -signal.SIGKILL
    with Client(live.url, live.admin_key) as rag:
        kb = rag.find_knowledge_base(kb_name)
    uploaded = documents(live, kb.id)
    assert 0 < len(uploaded) < len(names), output
    assert output.count("uploaded ") == len(uploaded)

    # 2. run again: only what did not arrive is sent, then everything is READY, nothing twice
    second = subprocess.run(cli(live, "ingest", str(folder), "--kb", kb_name, "--exclude", "*.bin", "--wait"),
                            env=env(), capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{len(names) - len(uploaded)} new" in second.stdout and f"{len(uploaded)} unchanged" in second.stdout
    assert "READY" in second.stdout and "ingest summary" in second.stdout
    docs = documents(live, kb.id)
    assert sorted(d.filename for d in docs) == names
    assert len({d.sha256 for d in docs}) == len(docs)
    assert {d.status for d in docs} == {"READY"}, [(d.filename, d.status, d.error_message) for d in docs]
    assert ".DS_Store" not in {d.filename for d in docs}

    # 3. unchanged files are skipped, a changed one replaces its document's content, junk is refused
    notes = folder / "guides" / "notes.md"
    notes.write_text("# Notes\n\nSecond version of the notes, with more words.\n")
    before = {d.filename: d for d in docs}
    third = subprocess.run(cli(live, "ingest", str(folder), "--kb", kb_name, "--wait"),
                           env=env(), capture_output=True, text=True, timeout=600)
    assert third.returncode == 1, third.stdout + third.stderr
    assert f"{len(names) - 1} unchanged" in third.stdout and "1 updated" in third.stdout and "1 new" in third.stdout
    assert third.stdout.count("uploaded ") == 1  # only the changed file went out
    assert "junk.bin" in third.stdout and "HTTP 415" in third.stdout and "1 failed" in third.stdout
    after = {d.filename: d for d in documents(live, kb.id)}
    assert set(after) == set(before)
    assert after["notes.md"].id == before["notes.md"].id and after["notes.md"].sha256 != before["notes.md"].sha256
    assert after["notes.md"].status == "READY"
    assert all(after[n].updated_at == before[n].updated_at for n in names if n != "notes.md")


def test_quiet_prints_failures_only_and_a_missing_knowledge_base_is_named(live, tmp_path) -> None:
    (tmp_path / "bad.bin").write_bytes(bytes(range(256)))
    kb = live.new_kb("quiet")
    quiet = subprocess.run(cli(live, "ingest", str(tmp_path), "--kb", kb["name"], "--quiet"),
                           env=env(), capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 1 and quiet.stdout == ""
    assert "bad.bin" in quiet.stderr and "HTTP 415" in quiet.stderr
    missing = subprocess.run(cli(live, "ingest", str(tmp_path), "--kb", "no-such-kb"),
                             env=env(), capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1 and "no-such-kb" in missing.stderr and "--create" in missing.stderr

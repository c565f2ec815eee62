"""``ultimate-rag ingest`` against a real running server: a folder of mixed files, the command
SIGKILLed midway and run again (nothing duplicated, everything READY), then a third run that skips
what is unchanged, replaces a changed file in place and reports an unreadable one with its reason.
Files of one name in several folders stay apart by their path; refusals are said once and not sent
again; ``--wait`` ends with the summary when nothing moves for ``--timeout`` seconds and when it is
interrupted, and waits through a server restart."""

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


def env(state: Path) -> dict[str, str]:
    """The command's environment: no server settings of the test process, and its own state directory
    (what the server refused is remembered there)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}, "PYTHONUNBUFFERED": "1",
            "ULTIMATE_RAG_STATE_DIR": str(state)}


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
                             env=env(tmp_path / "state"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
                            env=env(tmp_path / "state"), capture_output=True, text=True, timeout=600)
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
                           env=env(tmp_path / "state"), capture_output=True, text=True, timeout=600)
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
                           env=env(tmp_path / "state"), capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 1 and quiet.stdout == ""
    assert "bad.bin" in quiet.stderr and "HTTP 415" in quiet.stderr
    missing = subprocess.run(cli(live, "ingest", str(tmp_path), "--kb", "no-such-kb"),
                             env=env(tmp_path / "state"), capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1 and "no-such-kb" in missing.stderr and "--create" in missing.stderr


def held_workers(live):
    """The live deployment's workers paused (SIGSTOP): documents stay queued, nothing moves."""
    import contextlib

    @contextlib.contextmanager
    def paused():
        pids = live.api.worker_pids
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    return paused()


def test_same_names_stay_apart_refusals_are_said_once_and_not_sent_again(live, tmp_path) -> None:
    folder, state = tmp_path / "site", tmp_path / "state"
    for part, text in (("north", "fishing boats moor at the north quay"), ("south", "the ferry moors at the south quay"),
                       ("west", "yachts anchor in the west bay")):
        (folder / part).mkdir(parents=True)
        (folder / part / "article.md").write_text(f"# Harbour {part}\n\nIn the harbour, {text}.\n")
    (folder / "media").mkdir()
    for i in (1, 2):
        (folder / "media" / f"clip{i}.bin").write_bytes(bytes(range(256)) * (4 * i))
    kb = f"paths-{os.getpid()}-{time.monotonic_ns()}"

    first = subprocess.run(cli(live, "ingest", str(folder), "--kb", kb, "--create", "--wait"), env=env(state),
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 1, first.stdout + first.stderr  # two files refused
    refusals = [line for line in first.stderr.splitlines() if line.startswith("refused ")]
    assert sorted(r.split(":")[0] for r in refusals) == ["refused site/media/clip1.bin", "refused site/media/clip2.bin"]
    assert all("HTTP 415" in r and "supported formats" not in r for r in refusals)  # the list is said once, at the end
    assert first.stdout.count("the server reads: ") == 1 and ".pdf" in first.stdout
    assert "READY site/north/article.md" in first.stdout and "ingest summary" in first.stdout
    with Client(live.url, live.admin_key) as rag:
        docs = {d.source_path: d for d in rag.iter_documents(rag.find_knowledge_base(kb).id)}
    assert set(docs) == {"site/north/article.md", "site/south/article.md", "site/west/article.md"}
    assert {d.filename for d in docs.values()} == {"article.md"} and {d.status for d in docs.values()} == {"READY"}

    found = subprocess.run(cli(live, "search", "where does the ferry moor?", "--kb", kb, "--top-k", "1"),
                           env=env(state), capture_output=True, text=True, timeout=300)
    assert found.stdout.startswith("1. site/south/article.md · Harbour south"), found.stdout + found.stderr

    # again, with one file changed: the refused files are not sent again, the changed one replaces its own
    (folder / "west" / "article.md").write_text("# Harbour west\n\nIn the harbour, yachts anchor in the west bay "
                                                "and wait for the tide.\n")
    again = subprocess.run(cli(live, "ingest", str(folder), "--kb", kb, "--wait"), env=env(state),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "2 refused before" in again.stdout and "1 updated" in again.stdout and "2 unchanged" in again.stdout
    assert again.stdout.count("uploaded ") == 1 and "uploaded site/west/article.md" in again.stdout
    assert "were not sent again (--retry-refused sends them)" in again.stdout and "refused " not in again.stderr
    with Client(live.url, live.admin_key) as rag:
        after = {d.source_path: d for d in rag.iter_documents(rag.find_knowledge_base(kb).id)}
    assert after["site/west/article.md"].id == docs["site/west/article.md"].id
    assert after["site/west/article.md"].sha256 != docs["site/west/article.md"].sha256
    assert after["site/north/article.md"].updated_at == docs["site/north/article.md"].updated_at


def test_the_wait_ends_with_the_summary_when_nothing_moves_and_when_interrupted(live, tmp_path) -> None:
    folder, state = tmp_path / "notes", tmp_path / "state"
    folder.mkdir()
    (folder / "tide.md").write_text("# Tide\n\nHigh tide comes twice a day.\n")
    kb = live.new_kb("stalled")["name"]
    with held_workers(live):
        stalled = subprocess.run(cli(live, "ingest", str(folder), "--kb", kb, "--wait", "--timeout", "1"),
                                 env=env(state), capture_output=True, text=True, timeout=300)
        assert stalled.returncode == 3, stalled.stdout + stalled.stderr
        assert "ingest summary" in stalled.stdout and "Traceback" not in stalled.stderr
        assert "still running: 1 document(s) (PENDING 1); nothing changed for 1s (--timeout)" in stalled.stdout
        assert "  PENDING    notes/tide.md" in stalled.stdout

        (folder / "moon.md").write_text("# Moon\n\nThe moon pulls the tide.\n")
        waiting = subprocess.Popen(cli(live, "ingest", str(folder), "--kb", kb, "--wait"), env=env(state),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        assert waiting.stdout is not None
        while not (lines and lines[-1].startswith("uploaded notes/moon.md")):
            lines.append(waiting.stdout.readline())
            assert lines[-1] or waiting.poll() is None, "".join(lines)
        waiting.send_signal(signal.SIGINT)
        out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 130 and err.strip().endswith("interrupted"), out + err
    assert "ingest summary" in out and "still running: 2 document(s) (PENDING 2); interrupted" in out


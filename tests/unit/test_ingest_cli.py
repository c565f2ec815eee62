"""The parts of ``ultimate-rag ingest`` that decide and tell, without a server: which document a
changed file replaces (by its path in the folder), the refusals remembered by their bytes, the
estimate of the time left (steady: it counts down between finishes), and the exit statuses."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from ultimate_rag.cli_http.plan import NEW, UNCHANGED, UPDATE, LocalFile, Step, collect, plan, sha256_of
from ultimate_rag.cli_http.refusals import RefusedFiles
from ultimate_rag.cli_http.summary import Outcome, print_summary
from ultimate_rag.cli_http.watch import Board, BoardView, time_left
from ultimate_rag.client import Document


def doc(name: str, sha: str, path: str | None = None, status: str = "READY") -> Document:
    return Document(id=f"id-{path or name}", knowledge_base_id="kb", filename=name, status=status, sha256=sha,
                    metadata={"source": {"path": path}} if path else {})


def test_files_of_one_name_in_other_folders_replace_their_own_document(tmp_path: Path) -> None:
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "article.md").write_text(f"# {folder}\n\nversion one\n")
    (tmp_path / "b" / "article.md").write_text("# b\n\nversion two\n")  # changed since the last run
    (tmp_path / "legacy.md").write_text("new bytes")
    files = collect([str(tmp_path)], None, None)
    for f in files:
        f.sha256 = sha256_of(f.path)
    root = tmp_path.name  # the folder's name comes first
    assert sorted(f.relative for f in files) == [f"{root}/{p}" for p in ("a/article.md", "b/article.md",
                                                                          "c/article.md", "legacy.md")]
    for f in files:
        f.relative = f.relative.removeprefix(f"{root}/")
    sha = {f.relative: f.sha256 for f in files}
    existing = [doc("article.md", sha["a/article.md"], "a/article.md"), doc("article.md", "old-b", "b/article.md"),
                doc("article.md", "old-c", "c/article.md"), doc("legacy.md", "old-legacy")]  # uploaded before paths
    (tmp_path / "c" / "article.md").write_text("# c\n\nversion three\n")
    files[2].sha256 = sha256_of(files[2].path)
    steps = {s.file.relative: s for s in plan(files, existing)}
    assert steps["a/article.md"].action == UNCHANGED
    assert steps["b/article.md"].action == UPDATE and steps["b/article.md"].document is existing[1]
    assert steps["c/article.md"].action == UPDATE and steps["c/article.md"].document is existing[2]
    assert steps["legacy.md"].action == UPDATE and steps["legacy.md"].document is existing[3]

    alone = collect([str(tmp_path / "b" / "article.md")], None, None)  # a file named alone: its name
    assert alone[0].relative == alone[0].label == "article.md"
    alone[0].sha256 = "brand-new"
    assert plan(alone, existing)[0].action == NEW  # it is not guessed to be one of the three


def test_refusals_are_remembered_by_their_bytes_per_knowledge_base(tmp_path: Path) -> None:
    state = tmp_path / "state" / "ingest-refused.json"
    first = RefusedFiles("http://server/", "kb-1", state)
    first.remember("sha-junk", "junk.bin", 415, "unsupported file format: .bin")
    first.remember("sha-busy", "big.pdf", 503, "the database is unavailable")  # of the moment: not kept
    first.remember("sha-path", "a\x01.md", 422, "path contains control characters")  # the request's, not the bytes'
    first.remember("sha-meta", "m.md", 422, "metadata.source: reserved key")
    first.remember("sha-empty", "e.txt", 422, "the file is not readable text")  # the bytes': kept
    first.save()
    other = RefusedFiles("http://server", "kb-2", state)
    other.remember("sha-x", "x.bin", 413, "too large")
    other.save()  # the first knowledge base's refusals are kept beside

    again = RefusedFiles("http://server", "kb-1", state)
    refusal = again.get("sha-junk")
    assert refusal is not None and (refusal.status, refusal.file) == (415, "junk.bin")
    assert again.get("sha-busy") is None and again.get("sha-x") is None
    assert again.get("sha-path") is None and again.get("sha-meta") is None and again.get("sha-empty") is not None
    again.forget("sha-empty")
    assert RefusedFiles("http://server", "kb-2", state).get("sha-x") is not None
    again.forget("sha-junk")  # sent again and accepted (e.g. after a server upgrade)
    again.save()
    assert RefusedFiles("http://server", "kb-1", state).known == {}

    state.write_text("{not json")
    broken = RefusedFiles("http://server", "kb-1", state)
    assert broken.known == {} and broken.problem and "could not read" in broken.problem


def board(tracked: int, finished: int, last: float) -> Board:
    labels = {f"d{i}": f"dir/f{i}.md" for i in range(tracked)}
    b = Board(labels=labels, started=0.0, tracked=set(labels), last_finished=last)
    for i in range(tracked):
        b.docs[f"d{i}"] = Document(id=f"d{i}", knowledge_base_id="kb", filename=f"f{i}.md",
                                   status="READY" if i < finished else "PENDING")
    return b


def test_the_time_left_counts_down_between_finishes_and_is_rounded() -> None:
    assert board(10, 1, 30.0).estimate(31.0) == "estimating the time left"  # one finish is no rate
    four = board(10, 4, 40.0)  # 10 s a document: 60 s left at the fourth finish
    shown = [four.estimate(now) for now in (40.0, 45.0, 50.0, 70.0, 200.0)]
    assert shown == ["6.0/min, about 60 s left", "6.0/min, about 60 s left", "6.0/min, about 50 s left",
                     "6.0/min, about 30 s left", "6.0/min, about 10 s left"]  # down, never up, never "-:--"
    assert [time_left(s) for s in (3, 64, 119, 125, 3599, 5400, 7320)] == [
        "about 10 s", "about 60 s", "about 120 s", "about 2 min", "about 60 min", "about 1 h 30 min",
        "about 2 h 02 min"]
    line = four.line(45.0)
    assert line.startswith("4/10 done · READY 4 · running 0 · queued 6 · 6.0/min")


def test_every_end_says_what_happened_and_the_exit_status_tells_it(tmp_path: Path) -> None:
    def outcome(status: str | None, error: str | None = None, refused: bool = False) -> Outcome:
        d = Document(id=str(status), knowledge_base_id="kb", filename="f.md", status=status or "READY")
        return Outcome(Step(LocalFile(tmp_path / "f.md", "f.md", 1, relative="sub/f.md"), NEW), d, error, refused)

    def end(outcomes: list[Outcome], gave_up: str | None = None) -> tuple[int, str]:
        buffer = io.StringIO()
        console = Console(file=buffer, width=200)
        code = print_summary(outcomes, console, console, quiet=False, supported=[".md", ".pdf"], gave_up=gave_up,
                             state_problem=None)
        return code, buffer.getvalue()

    assert end([outcome("READY")])[0] == 0
    code, text = end([outcome("READY"), outcome("PENDING")], gave_up="nothing changed for 5s (--timeout)")
    assert code == 3 and "still running: 1 document(s) (PENDING 1); nothing changed for 5s" in text
    assert "sub/f.md" in text
    code, text = end([outcome(None, error="unsupported file format: .bin (HTTP 415)", refused=True),
                      outcome("PENDING")], gave_up="interrupted")
    assert code == 1 and text.count("the server reads: .md, .pdf") == 1 and "ingest summary" in text


def test_the_upload_form_carries_the_path(tmp_path: Path) -> None:
    import httpx

    from ultimate_rag.client import Client

    seen: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.read())
        return httpx.Response(202, json={"id": "d", "knowledge_base_id": "kb", "filename": "article.md",
                                         "status": "PENDING", "source": {"kind": "upload", "path": "b/article.md"},
                                         "metadata": {"source": {"path": "b/article.md", "folder": "b"}}})

    with Client(http=httpx.Client(transport=httpx.MockTransport(handle), base_url="http://fake")) as rag:
        made = rag.upload("kb", b"# b\n", filename="article.md", path="b/article.md")
    assert made.source_path == "b/article.md"
    assert b'name="path"\r\n\r\nb/article.md' in seen[0] and b'filename="article.md"' in seen[0]
    assert json.loads(json.dumps(made.raw))["source"]["path"] == "b/article.md"


def test_the_live_block_shows_the_files_in_flight_furthest_first_and_a_lost_connection() -> None:
    live = Board(labels={"1": "docs/a.pdf", "2": "docs/b.md", "3": "docs/c.md"}, started=0.0, tracked={"1", "2", "3"})
    for doc_id, status, progress in (("1", "PARSING", {"stage": "PARSING", "done": 2, "total": 10}),
                                     ("2", "EMBEDDING", {"stage": "EMBEDDING", "done": 5, "total": 6,
                                                         "waiting": "embedder"}),
                                     ("3", "PENDING", {})):
        live.update(Document(id=doc_id, knowledge_base_id="kb", filename="f", status=status, progress=progress))
    live.away = "connection refused"
    console = Console(record=True, width=120, force_terminal=True, color_system=None)
    console.print(BoardView(live))
    text = console.export_text()
    assert "0/3 done" in text and "running 2" in text and "queued 1" in text and "estimating" in text
    assert "EMBEDDING  docs/b.md  (chunks 5/6, waiting for the embedder)" in text
    assert "PARSING    docs/a.pdf  (pages 2/10)" in text and text.index("docs/b.md") < text.index("docs/a.pdf")
    assert "docs/c.md" not in text  # queued: counted, not listed
    assert "cannot be reached (connection refused): reconnecting" in text

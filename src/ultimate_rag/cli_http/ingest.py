"""``ultimate-rag ingest PATH... --kb KB``: folders in over HTTP, with progress bars on a terminal
(plain lines when piped), and always a summary at the end (:mod:`.summary`: the exit statuses).
What the knowledge base already holds is skipped, so a rerun resumes (:mod:`.plan`); files the
server refused for their bytes are not sent again while the bytes are the same (:mod:`.refusals`);
``--wait`` follows the documents until they settle (:mod:`.watch`)."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from ..client import ApiError, AsyncClient, Conflict, Document, TransportError
from ..client._core import ProgressCallback
from .common import CliError, add_connection_options, connect, consoles, knowledge_base, run, server_url
from .fields import metadata_of, metadata_pair
from .plan import NEW, UNCHANGED, Step, collect, plan, sha256_of
from .refusals import RefusedFiles, follows_from_bytes
from .summary import REFUSED_BEFORE, Outcome, print_summary
from .watch import SETTLED, Board, follow

DEFAULT_TIMEOUT = 1800.0


def add_ingest_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ingest", help="upload files and folders into a knowledge base (over HTTP, resumable)",
                       description=__doc__, epilog="exit status: 0 everything in (and READY with --wait); 1 a file "
                       "refused or a document FAILED; 2 wrong usage; 3 --wait gave up with documents still running",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--kb", required=True, help="knowledge base name or id")
    p.add_argument("--create", action="store_true", help="create the knowledge base if there is none by that name")
    p.add_argument("--include", action="append", metavar="GLOB", help="only files matching (repeatable)")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="leave out files matching (repeatable)")
    p.add_argument("--concurrency", type=int, default=4, help="uploads at once (default 4)")
    p.add_argument("--wait", action="store_true", help="wait until every document is READY or FAILED")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"for --wait: give up after this many seconds in which no document changed (default "
                        f"{DEFAULT_TIMEOUT:g}); the summary then lists what is still running")
    p.add_argument("--retry-refused", action="store_true",
                   help="send again the files the server refused before (same bytes), e.g. after an upgrade")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress and no summary: failures only")
    p.add_argument("--metadata", action="append", type=metadata_pair, metavar="KEY=VALUE",
                   help="a field of every document (repeatable): office=Berlin, year=2025, tags='[\"hr\"]'")
    add_connection_options(p)
    p.set_defaults(func=lambda args: run(lambda: Ingest(args).run()))


@dataclass
class Ingest:
    args: argparse.Namespace
    outcomes: list[Outcome] = field(default_factory=list)
    supported: list[str] = field(default_factory=list)  # the formats the server reads (said once, at the end)

    def __post_init__(self) -> None:
        self.out, self.err = consoles(self.args.quiet)
        self.live = self.out.is_terminal and not self.args.quiet  # bars on a TTY, plain lines otherwise
        self.refused: RefusedFiles | None = None
        self.gave_up: str | None = None
        self.metadata = metadata_of(self.args.metadata)  # --metadata: fields of every document

    async def run(self) -> int:
        if self.args.concurrency < 1:
            raise CliError("--concurrency must be 1 or more", 2)
        if self.args.timeout <= 0:
            raise CliError("--timeout must be more than 0", 2)
        try:
            files = collect(self.args.paths, self.args.include, self.args.exclude)
        except FileNotFoundError as exc:
            raise CliError(str(exc), 2) from None
        for f in files:  # hashing may take a while for big folders: off the event loop
            try:
                f.sha256 = await asyncio.to_thread(sha256_of, f.path)
            except OSError as exc:
                raise CliError(f"cannot read {f.shown}: {exc.strerror or exc}") from None
        async with connect(self.args) as rag:
            kb = await knowledge_base(rag, self.args.kb, create=self.args.create)
            existing = [d async for d in rag.iter_documents(kb.id, page_size=500)]
            self.refused = RefusedFiles(server_url(self.args), kb.id)
            steps = self._skip_refused(plan(files, existing))
            self._line(f"{len(files)} file(s) for {kb.name}: " + ", ".join(
                f"{n} {a}" for a, n in Counter(s.action for s in steps).items()) if files else "no files found")
            started = time.monotonic()
            try:
                await self._upload(rag, kb.id, steps)
                self.refused.save()
                if self.args.wait:
                    await self._wait(rag, started)
            except asyncio.CancelledError:  # Ctrl-C: what happened so far, then "interrupted"
                self.refused.save()
                self.gave_up = "interrupted"
                self._summary()
                raise
        return self._summary()

    def _line(self, text: str) -> None:
        self.out.print(escape(text), highlight=False)

    def _skip_refused(self, steps: list[Step]) -> list[Step]:
        """Files refused before with the same bytes are not sent again (unless --retry-refused)."""
        assert self.refused is not None
        kept = []
        for step in steps:
            before = self.refused.get(step.file.sha256) if step.action != UNCHANGED else None
            if before is None or self.args.retry_refused:
                kept.append(step)
                continue
            skipped = Step(step.file, REFUSED_BEFORE, step.document)
            kept.append(skipped)
            self.outcomes.append(Outcome(skipped, step.document, error=f"{before.reason} (refused before, "
                                                                      f"HTTP {before.status})", refused=True))
        return kept

    async def _upload(self, rag: AsyncClient, kb_id: str, steps: list[Step]) -> None:
        todo = [s for s in steps if s.action not in (UNCHANGED, REFUSED_BEFORE)]
        for step in steps:
            if step.action == UNCHANGED:
                if self.metadata and step.document and not _holds(step.document.metadata, self.metadata):
                    step.document = await rag.update_metadata(step.document.id, self.metadata)  # no upload
                self.outcomes.append(Outcome(step, step.document))
        if not todo:
            return
        limit = asyncio.Semaphore(self.args.concurrency)
        with self._progress() as bars:
            files = bars.add_task("files", total=len(todo), unit="files")
            sent = bars.add_task("bytes", total=sum(s.file.size for s in todo), unit="bytes")

            async def one(step: Step) -> None:
                async with limit:
                    outcome = await self._send(rag, kb_id, step, bars, sent)
                self.outcomes.append(outcome)
                bars.advance(files)
                label = escape(step.file.label)
                if outcome.error:
                    word = "refused" if outcome.refused else "failed"
                    # above the bars on a terminal (never glued to them), on stderr when piped
                    (bars.console if self.live else self.err).print(
                        f"[red]{word}[/red] {label}: {escape(outcome.error)}", highlight=False)
                elif not self.live:
                    self._line(f"uploaded {step.file.label} ({step.action}, {step.file.size} bytes)")

            await asyncio.gather(*(one(s) for s in todo))

    async def _send(self, rag: AsyncClient, kb_id: str, step: Step, bars: Progress, task: TaskID) -> Outcome:
        done = 0

        def progress(sent: int, _total: int) -> None:
            nonlocal done
            bars.advance(task, sent - done)
            done = sent

        try:
            outcome = Outcome(step, await self._put(rag, kb_id, step, progress))
        except ApiError as exc:
            bars.advance(task, step.file.size - done)
            return self._refusal(step, exc)
        except TransportError as exc:  # the connection broke: a rerun sends it again
            bars.advance(task, step.file.size - done)
            return Outcome(step, step.document, error=str(exc))
        except OSError as exc:
            bars.advance(task, step.file.size - done)
            return Outcome(step, step.document, error=f"cannot read the file: {exc.strerror or exc}")
        assert self.refused is not None
        self.refused.forget(step.file.sha256)
        return outcome

    async def _put(self, rag: AsyncClient, kb_id: str, step: Step, progress: ProgressCallback) -> Document:
        if step.action == NEW:
            return await rag.upload(kb_id, step.file.path, progress=progress, metadata=self.metadata,
                                    path=step.file.relative or None)
        assert step.document is not None
        if self.metadata:  # a document ingested before gets the fields too (a merge: its other fields stay)
            await rag.update_metadata(step.document.id, self.metadata)
        try:
            return await rag.replace_content(step.document.id, step.file.path, progress=progress)
        except Conflict:  # being processed: wait for it to settle, then once more
            await rag.wait_until_ready([step.document.id], timeout=float("inf"), idle_timeout=self.args.timeout)
            return await rag.replace_content(step.document.id, step.file.path, progress=progress)

    def _refusal(self, step: Step, exc: ApiError) -> Outcome:
        """The server's reason, without the list of every format it reads (that is said once, at
        the end); a refusal for the file's bytes is remembered for the next run."""
        reason = exc.detail
        body = exc.body if isinstance(exc.body, dict) else {}
        if isinstance(body.get("supported_formats"), list):
            self.supported = [str(f) for f in body["supported_formats"]]
            reason = reason.split("; supported formats:", 1)[0]
        assert self.refused is not None
        self.refused.remember(step.file.sha256, step.file.label, exc.status_code, reason)
        return Outcome(step, step.document, error=f"{reason} (HTTP {exc.status_code})",
                       refused=follows_from_bytes(exc.status_code, reason))

    async def _wait(self, rag: AsyncClient, started: float) -> None:
        waiting = {o.document.id: o for o in self.outcomes if o.document is not None and not o.error}
        if not waiting:
            return
        tracked = {i for i, o in waiting.items() if o.step.action != UNCHANGED or o.document is None
                   or o.document.status not in SETTLED}
        board = Board(labels={i: o.step.file.label for i, o in waiting.items()}, started=started, tracked=tracked)

        def reason_of(doc: Document) -> str:
            return doc.error_message or "failed"

        try:
            settled = await follow(rag, board, self.out, self.err, live=self.live, idle_timeout=self.args.timeout,
                                   reason_of=reason_of)
        finally:
            for doc_id, doc in board.docs.items():
                waiting[doc_id].document = doc
        if not settled:
            self.gave_up = f"nothing changed for {self.args.timeout:g}s (--timeout)"
            if board.away:
                self.gave_up += f" and the server cannot be reached ({board.away})"

    def _progress(self) -> Progress:
        return Progress(TextColumn("{task.description:<24}"), BarColumn(), _Amount(), console=self.out,
                        disable=not self.live, transient=False)

    def _summary(self) -> int:
        assert self.refused is not None
        return print_summary(self.outcomes, self.out, self.err, quiet=self.args.quiet, supported=self.supported,
                             gave_up=self.gave_up, state_problem=self.refused.problem)


def _holds(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all((isinstance(v, dict) and isinstance(current.get(k), dict) and _holds(current[k], v))
               or current.get(k) == v for k, v in wanted.items())


class _Amount(ProgressColumn):
    """Bytes and speed for the bytes bar, ``done/total`` for the others."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes, self._speed, self._count = DownloadColumn(), TransferSpeedColumn(), MofNCompleteColumn()

    def render(self, task: Task) -> RenderableType:
        if task.fields.get("unit") == "bytes":
            return Text.assemble(self._bytes.render(task), " ", self._speed.render(task))
        return self._count.render(task)

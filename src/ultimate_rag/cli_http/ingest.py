"""``ultimate-rag ingest PATH... --kb KB``: folders in over HTTP, with progress bars on a terminal
(plain lines when piped), a summary with each failure's reason, and a non-zero exit if anything
failed. What the knowledge base already holds is skipped, so a rerun resumes (see :mod:`.plan`)."""

from __future__ import annotations

import argparse
import asyncio
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
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from ..client import ApiError, AsyncClient, Conflict, Document, TransportError
from .common import CliError, add_connection_options, connect, consoles, knowledge_base, run
from .fields import metadata_of, metadata_pair
from .plan import NEW, UNCHANGED, UPDATE, Step, collect, plan, sha256_of


def add_ingest_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ingest", help="upload files and folders into a knowledge base (over HTTP, resumable)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--kb", required=True, help="knowledge base name or id")
    p.add_argument("--create", action="store_true", help="create the knowledge base if there is none by that name")
    p.add_argument("--include", action="append", metavar="GLOB", help="only files matching (repeatable)")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="leave out files matching (repeatable)")
    p.add_argument("--concurrency", type=int, default=4, help="uploads at once (default 4)")
    p.add_argument("--wait", action="store_true", help="wait until every document is READY or FAILED")
    p.add_argument("--timeout", type=float, default=3600.0, help="for --wait, in seconds (default 3600)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress and no summary: failures only")
    p.add_argument("--metadata", action="append", type=metadata_pair, metavar="KEY=VALUE",
                   help="a field of every document (repeatable): office=Berlin, year=2025, tags='[\"hr\"]'")
    add_connection_options(p)
    p.set_defaults(func=lambda args: run(lambda: Ingest(args).run()))


@dataclass
class Outcome:
    step: Step
    document: Document | None = None
    error: str | None = None


@dataclass
class Ingest:
    args: argparse.Namespace
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out, self.err = consoles(self.args.quiet)
        self.live = self.out.is_terminal and not self.args.quiet  # bars on a TTY, plain lines otherwise

    async def run(self) -> int:
        if self.args.concurrency < 1:
            raise CliError("--concurrency must be 1 or more", 2)
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
            steps = plan(files, existing)
            self._line(f"{len(files)} file(s) for {kb.name}: " + ", ".join(
                f"{n} {a}" for a, n in Counter(s.action for s in steps).items()) if files else "no files found")
            await self._upload(rag, kb.id, steps)
            if self.args.wait:
                await self._wait(rag)
        return self._summary()

    def _line(self, text: str) -> None:
        self.out.print(escape(text), highlight=False)

    async def _upload(self, rag: AsyncClient, kb_id: str, steps: list[Step]) -> None:
        todo = [s for s in steps if s.action != UNCHANGED]
        metadata = metadata_of(self.args.metadata)
        for step in steps:
            if step.action == UNCHANGED and step.document is not None:
                if metadata and not _holds(step.document.metadata, metadata):  # the fields, without an upload
                    step.document = await rag.update_metadata(step.document.id, metadata)
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
                if outcome.error:
                    self.err.print(f"failed {escape(step.file.shown)}: {escape(outcome.error)}", highlight=False)
                elif not self.live:
                    self._line(f"uploaded {step.file.shown} ({step.action}, {step.file.size} bytes)")

            await asyncio.gather(*(one(s) for s in todo))

    async def _send(self, rag: AsyncClient, kb_id: str, step: Step, bars: Progress, task: TaskID) -> Outcome:
        done = 0

        def progress(sent: int, _total: int) -> None:
            nonlocal done
            bars.advance(task, sent - done)
            done = sent

        metadata = metadata_of(self.args.metadata)
        try:
            if step.action == NEW:
                return Outcome(step, await rag.upload(kb_id, step.file.path, progress=progress, metadata=metadata,
                                                      path=step.file.relative or None))
            assert step.document is not None
            if metadata:  # a document ingested before gets the fields too (a merge: its other fields stay)
                await rag.update_metadata(step.document.id, metadata)
            try:
                return Outcome(step, await rag.replace_content(step.document.id, step.file.path, progress=progress))
            except Conflict:  # being processed: wait for it to settle, then once more
                await rag.wait_until_ready([step.document.id], timeout=self.args.timeout)
                return Outcome(step, await rag.replace_content(step.document.id, step.file.path, progress=progress))
        except ApiError as exc:
            bars.advance(task, step.file.size - done)
            return Outcome(step, step.document, error=f"{exc.detail} (HTTP {exc.status_code})")
        except TransportError as exc:  # the connection broke: a rerun sends it again
            bars.advance(task, step.file.size - done)
            return Outcome(step, step.document, error=str(exc))
        except OSError as exc:
            bars.advance(task, step.file.size - done)
            return Outcome(step, step.document, error=f"cannot read the file: {exc.strerror or exc}")

    async def _wait(self, rag: AsyncClient) -> None:
        waiting = {o.document.id: o for o in self.outcomes if o.document is not None and not o.error}
        if not waiting:
            return
        statuses: dict[str, str] = {}
        with self._progress() as bars:
            task = bars.add_task("processing", total=len(waiting))

            def update(doc: Document) -> None:
                if statuses.get(doc.id) == doc.status:
                    return
                statuses[doc.id] = doc.status
                waiting[doc.id].document = doc
                counts = Counter(statuses.values())
                bars.update(task, completed=sum(1 for s in statuses.values() if s in ("READY", "FAILED", "OUTDATED",
                                                                                      "DELETED")),
                            description=" ".join(f"{s} {n}" for s, n in sorted(counts.items())))
                if not self.live and doc.is_stable:
                    self._line(f"{doc.status} {waiting[doc.id].step.file.shown}")

            try:
                docs = await rag.wait_until_ready(list(waiting), timeout=self.args.timeout, on_update=update)
            except TimeoutError as exc:
                raise CliError(f"{exc} (--timeout {self.args.timeout:g})") from None
        for doc in docs:
            waiting[doc.id].document = doc

    def _progress(self) -> Progress:
        return Progress(TextColumn("{task.description:<24}"), BarColumn(), _Amount(), TimeRemainingColumn(),
                        console=self.out, disable=not self.live, transient=False)

    def _summary(self) -> int:
        rows, failures = tally(self.outcomes)
        table = Table(title="ingest summary")
        for column in ("action", "files", "READY", "FAILED", "other"):
            table.add_column(column, justify="left" if column == "action" else "right")
        for row in rows:
            table.add_row(*(escape(str(cell)) for cell in row))
        self.out.print(table)
        if failures:
            errors = Table(title=f"{len(failures)} failed")
            errors.add_column("file")
            errors.add_column("reason")
            for shown, reason in failures:
                errors.add_row(escape(shown), escape(reason))
            (self.err if self.args.quiet else self.out).print(errors)
        return 1 if failures else 0


def _holds(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all((isinstance(v, dict) and isinstance(current.get(k), dict) and _holds(current[k], v))
               or current.get(k) == v for k, v in wanted.items())


def tally(outcomes: list[Outcome]) -> tuple[list[tuple[str, int, int, int, str]], list[tuple[str, str]]]:
    """Per action: files, READY, FAILED and the other statuses; and each failure with its reason (an
    upload refused, or a document that is FAILED)."""
    def state(o: Outcome) -> str:
        if o.error:
            return "FAILED"
        return o.document.status if o.document else "same bytes as another file"

    rows = []
    for action in (NEW, UPDATE, UNCHANGED):
        mine = [o for o in outcomes if o.step.action == action]
        if mine:
            status = Counter(state(o) for o in mine)
            rows.append((action, len(mine), status.pop("READY", 0), status.pop("FAILED", 0),
                         " ".join(f"{s} {n}" for s, n in sorted(status.items()))))
    failures = [(o.step.file.shown, o.error or (o.document.error_message if o.document else None) or "failed")
                for o in outcomes if state(o) == "FAILED"]
    return rows, failures

class _Amount(ProgressColumn):
    """Bytes and speed for the bytes bar, ``done/total`` for the others."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes, self._speed, self._count = DownloadColumn(), TransferSpeedColumn(), MofNCompleteColumn()

    def render(self, task: Task) -> RenderableType:
        if task.fields.get("unit") == "bytes":
            return Text.assemble(self._bytes.render(task), " ", self._speed.render(task))
        return self._count.render(task)

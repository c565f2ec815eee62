"""``ingest --wait``: following the documents until they settle. On a terminal one live block: a bar
with the counts and the time left, then the files being worked on (stage and progress); each
failure is printed above it, with its reason, as it happens. Piped: a line per settled document
and a line of counts every half minute. The time left comes from the rate at which this run's
documents have finished in this knowledge base (so it is steady, and says "estimating" until
there is a rate to speak of). A server that restarts is waited for; ``--timeout`` counts only
time in which nothing changed."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..client import AsyncClient, Document

SETTLED = frozenset({"READY", "FAILED", "OUTDATED", "DELETED"})
QUEUED = frozenset({"PENDING"})
MIN_FINISHED_FOR_ESTIMATE = 2
MIN_SECONDS_FOR_ESTIMATE = 10.0
IN_FLIGHT_SHOWN = 8
PLAIN_COUNTS_EVERY = 30.0


def time_left(seconds: float) -> str:
    """Rounded so that the figure does not flicker: 10 s steps under two minutes, then minutes,
    then hours and minutes."""
    if seconds < 120:
        return f"about {max(10, round(seconds / 10.0) * 10)} s"
    minutes = round(seconds / 60.0)
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60:02d} min"


@dataclass
class Board:
    """The documents waited for and what the run has measured of them. ``tracked`` are those this
    run waits on (uploaded now, or unsettled when it began): the rate counts them alone."""

    labels: dict[str, str]
    started: float
    tracked: set[str]
    docs: dict[str, Document] = field(default_factory=dict)
    away: str | None = None  # why the server cannot be reached now
    last_finished: float | None = None  # when the latest tracked document settled (as seen here)

    def update(self, doc: Document) -> Document | None:
        """Take a document's new state; returns it when one this run waits on has just settled."""
        before = self.docs.get(doc.id)
        self.docs[doc.id] = doc
        if doc.id not in self.tracked or doc.status not in SETTLED:
            return None
        if before is not None and before.status == doc.status:
            return None
        self.last_finished = time.monotonic()
        return doc

    def counts(self) -> Counter[str]:
        return Counter(d.status for d in self.docs.values())

    def finished(self) -> int:
        return sum(1 for i in self.tracked if i in self.docs and self.docs[i].status in SETTLED)

    def estimate(self, now: float) -> str:
        """Documents a minute and the time left. The rate is this run's documents finished over the
        time until the latest finished (measured in this knowledge base, queue and all); between two
        finishes the time left counts down instead of growing, so it does not jump about."""
        done = self.finished()
        remaining = len(self.tracked) - done
        if remaining <= 0:
            return ""
        measured = (self.last_finished or now) - self.started
        if done < MIN_FINISHED_FOR_ESTIMATE or measured < MIN_SECONDS_FOR_ESTIMATE:
            return "estimating the time left"
        seconds_each = measured / done
        left = remaining * seconds_each - (now - (self.last_finished or now))
        return f"{60.0 / seconds_each:.1f}/min, {time_left(max(left, 0.0))} left"

    def line(self, now: float) -> str:
        counts = self.counts()
        settled = sum(n for s, n in counts.items() if s in SETTLED)
        running = sum(n for s, n in counts.items() if s not in SETTLED and s not in QUEUED)
        parts = [f"{settled}/{len(self.labels)} done"]
        parts += [f"{s} {counts[s]}" for s in ("READY", "FAILED", "OUTDATED", "DELETED") if counts[s]]
        parts += [f"running {running}", f"queued {counts['PENDING']}"]
        estimate = self.estimate(now)
        if estimate:
            parts.append(estimate)
        return " · ".join(parts)

    def in_flight(self) -> list[tuple[str, str, str]]:
        """(status, file, detail) of the documents being worked on, furthest along first."""
        busy = [d for d in self.docs.values() if d.status not in SETTLED and d.status not in QUEUED]
        busy.sort(key=lambda d: (-_fraction(d), self.labels.get(d.id, d.filename)))
        return [(d.status, self.labels.get(d.id, d.filename), _detail(d)) for d in busy]

    def still_running(self) -> list[Document]:
        return [d for d in self.docs.values() if d.status not in SETTLED]


def _fraction(doc: Document) -> float:
    p = doc.progress or {}
    return float(p.get("done") or 0) / float(p["total"]) if p.get("total") else 0.0


def _detail(doc: Document) -> str:
    p = doc.progress or {}
    if not p.get("total"):
        return ""
    unit = "pages" if p.get("stage") == "PARSING" else "chunks"
    text = f"{unit} {p.get('done') or 0}/{p['total']}"
    if p.get("waiting") == "embedder":
        text += ", waiting for the embedder"
    return text


class BoardView:
    """The live block: the bar and counts, the connection when it is lost, the files in flight."""

    def __init__(self, board: Board) -> None:
        self.board = board

    def __rich__(self) -> RenderableType:
        board, now = self.board, time.monotonic()
        total = max(1, len(board.labels))
        settled = sum(1 for d in board.docs.values() if d.status in SETTLED)
        head = Table.grid(padding=(0, 1))
        head.add_row(Text("processing"), ProgressBar(total=total, completed=settled, width=30),
                     Text(board.line(now)))
        rows: list[RenderableType] = [head]
        if board.away:
            rows.append(Text(f"the server cannot be reached ({board.away}): reconnecting…", style="yellow"))
        flying = board.in_flight()
        for status, label, detail in flying[:IN_FLIGHT_SHOWN]:
            rows.append(Text(f"  {status:<10} {label}" + (f"  ({detail})" if detail else ""), style="dim"))
        if len(flying) > IN_FLIGHT_SHOWN:
            rows.append(Text(f"  … and {len(flying) - IN_FLIGHT_SHOWN} more running", style="dim"))
        return Group(*rows)


async def follow(rag: AsyncClient, board: Board, out: Console, err: Console, *, live: bool,
                 idle_timeout: float, reason_of: Callable[[Document], str]) -> bool:
    """Wait until every document settles; False when ``idle_timeout`` seconds passed with no change
    (the documents still running are in the board)."""
    def failed(doc: Document) -> None:
        line = f"[red]FAILED[/red] {escape(board.labels.get(doc.id, doc.filename))}: {escape(reason_of(doc))}"
        (out if live else err).print(line, highlight=False)

    def update(doc: Document) -> None:
        settled = board.update(doc)
        if settled is None:
            return
        if settled.status == "FAILED":
            failed(settled)
        elif not live:
            out.print(f"{settled.status} {escape(board.labels.get(doc.id, doc.filename))}", highlight=False)

    def connection(why: str | None) -> None:
        board.away = why
        if not live:
            err.print(f"the server cannot be reached ({why}): reconnecting" if why else "the server is back",
                      highlight=False)

    async def plain_counts() -> None:
        while True:
            await asyncio.sleep(PLAIN_COUNTS_EVERY)
            out.print(f"waiting: {board.line(time.monotonic())}", highlight=False)

    ids = list(board.labels)
    ticker = None if live else asyncio.create_task(plain_counts())
    display = Live(BoardView(board), console=out, refresh_per_second=4, transient=False) if live else None
    try:
        if display is not None:
            display.start()
        await rag.wait_until_ready(ids, timeout=float("inf"), idle_timeout=idle_timeout, on_update=update,
                                   on_connection=connection)
        return True
    except TimeoutError:
        return False
    finally:
        if display is not None:
            display.stop()
        if ticker is not None:
            ticker.cancel()

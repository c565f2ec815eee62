"""The end of every ``ingest`` (finished, timed out or interrupted): what each action came to (READY,
FAILED, refused, still running), each failure with its reason, the formats the server reads (said
once, not on every refused file), what is still running, and the exit status:

    0  every file is in the knowledge base (with --wait: settled, none FAILED)
    1  a file was refused (now, or before with the same bytes) or a document FAILED
    2  the command was used wrongly (no key, no such path, a bad option)
    3  --wait gave up: documents are still running after --timeout seconds without progress
       (and none failed; the server keeps working on them)
  130  interrupted (Ctrl-C), after the summary
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..client import Document
from .plan import NEW, UNCHANGED, UPDATE, Step

REFUSED_BEFORE = "refused before"
SETTLED = frozenset({"READY", "FAILED", "OUTDATED", "DELETED"})
RUNNING_LISTED = 20
EXIT_OK, EXIT_FAILED, EXIT_STILL_RUNNING = 0, 1, 3


@dataclass
class Outcome:
    step: Step
    document: Document | None = None
    error: str | None = None  # the upload was refused or did not arrive: why
    refused: bool = False  # refused for its bytes (now, or before: ``step.action`` is REFUSED_BEFORE)

    def state(self) -> str:
        if self.refused:
            return "refused"
        if self.error:
            return "FAILED"
        return self.document.status if self.document else "same bytes as another file"

    def reason(self) -> str:
        return self.error or (self.document.error_message if self.document else None) or "failed"


def tally(outcomes: list[Outcome]) -> tuple[list[tuple[str, int, int, int, int, int, str]], list[tuple[str, str]]]:
    """Per action: files, READY, FAILED, refused, still running and the other states; and each
    failure (refused, not uploaded or FAILED) with its reason."""
    rows = []
    for action in (NEW, UPDATE, UNCHANGED, REFUSED_BEFORE):
        mine = [o for o in outcomes if o.step.action == action]
        if not mine:
            continue
        states = Counter(o.state() for o in mine)
        running = sum(n for s, n in states.items() if s.isupper() and s not in SETTLED)
        for s in [s for s in states if s.isupper() and s not in SETTLED]:
            del states[s]
        rows.append((action, len(mine), states.pop("READY", 0), states.pop("FAILED", 0), states.pop("refused", 0),
                     running, " ".join(f"{s} {n}" for s, n in sorted(states.items()))))
    failures = [(o.step.file.label, o.reason()) for o in outcomes if o.state() in ("FAILED", "refused")]
    return rows, failures


def print_summary(outcomes: list[Outcome], out: Console, err: Console, *, quiet: bool, supported: list[str],
                  gave_up: str | None, state_problem: str | None) -> int:
    """The tables, and the exit status. ``gave_up``: why the wait ended before everything settled."""
    rows, failures = tally(outcomes)
    table = Table(title="ingest summary")
    for column in ("action", "files", "READY", "FAILED", "refused", "still running", "other"):
        table.add_column(column, justify="left" if column == "action" else "right")
    for row in rows:
        table.add_row(*(escape(str(cell)) for cell in row))
    out.print(table)
    loud = err if quiet else out
    if failures:
        errors = Table(title=f"{len(failures)} failed")
        errors.add_column("file")
        errors.add_column("reason")
        for label, reason in failures:
            errors.add_row(escape(label), escape(reason))
        loud.print(errors)
    again = sum(1 for o in outcomes if o.step.action == REFUSED_BEFORE)
    if again:
        loud.print(f"{again} file(s) refused before with the same bytes were not sent again "
                   "(--retry-refused sends them)", highlight=False)
    if supported and any(o.refused for o in outcomes):
        loud.print(f"the server reads: {', '.join(supported)}", highlight=False)
    if state_problem:
        err.print(f"note: {escape(state_problem)}", highlight=False)
    running = [o for o in outcomes if o.document is not None and not o.error and o.document.status not in SETTLED]
    if running and gave_up:
        statuses = Counter(o.document.status for o in running if o.document is not None)
        out.print(f"still running: {len(running)} document(s) ("
                  + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())) + ")"
                  + f"; {gave_up}. The server keeps working on them: "
                  "run the same command again to follow them, or `ultimate-rag status`.", highlight=False)
        for o in running[:RUNNING_LISTED]:
            assert o.document is not None
            out.print(f"  {o.document.status:<10} {escape(o.step.file.label)}", highlight=False)
        if len(running) > RUNNING_LISTED:
            out.print(f"  … and {len(running) - RUNNING_LISTED} more", highlight=False)
    if failures:
        return EXIT_FAILED
    return EXIT_STILL_RUNNING if running and gave_up else EXIT_OK

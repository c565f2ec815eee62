"""The time limits of a parse child, counted in the CPU time it uses, not in wall-clock time: a
loaded machine makes a healthy scan slow, not long, and must not fail it.

* **Per page** (``ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS``): one page (a PDF page, an image frame, a
  slide, a sheet, a chapter) — or the whole parse of a format without pages — may use this many
  CPU seconds. Each page done starts the count again.
* **Per document**: all pages together get ``pages × ULTIMATE_RAG_PARSE_PAGE_SECONDS`` (at least
  the per-page limit), at most ``ULTIMATE_RAG_PARSE_DOCUMENT_TIMEOUT_SECONDS``: a six-page scan
  cannot take six per-page limits, a book gets time in proportion to its length.
* **Stalled**: a child that uses no CPU at all for the per-page limit (at least a minute) in
  wall-clock time is stuck (a deadlock, a stopped process): starved of CPU on a busy machine it
  still gets some, niced or not.

CPU time is user + system time of the child's every thread, read from ``/proc/<pid>/stat``
(``cpu_seconds``); where there is no ``/proc`` the limits count wall-clock time instead. The child
also sets ``RLIMIT_CPU`` a little past its budget, a backstop for a parent that is gone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SETTING = "ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS"
ALLOWANCE_SETTING = "ULTIMATE_RAG_PARSE_PAGE_SECONDS"
DOCUMENT_SETTING = "ULTIMATE_RAG_PARSE_DOCUMENT_TIMEOUT_SECONDS"
STALL_SECONDS = 60.0  # no CPU at all for this long (or the per-page limit, if longer): stuck, not starved


@dataclass(frozen=True, slots=True)
class TimeLimits:
    page_seconds: float = 300.0  # one page, or a parse without pages
    page_allowance_seconds: float = 120.0  # the document's budget per page
    document_seconds: float = 14_400.0  # the document's budget at most

    def budget(self, pages: int) -> float:
        """CPU seconds for a document of ``pages`` pages."""
        return min(self.document_seconds, max(self.page_seconds, pages * self.page_allowance_seconds))


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a running process, all its threads; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()  # the name, in parentheses, may hold spaces
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


def cpu_ceiling(limits: TimeLimits, used: float, total: int) -> float:
    """CPU seconds a child that has used ``used`` may use before ``RLIMIT_CPU`` stops it: a
    backstop a little past the limits (the parent normally stops it first)."""
    budget = limits.budget(total) if total else limits.page_seconds
    return min(used + limits.page_seconds, budget) + 10


class Watch:
    """Follows one parse: its progress (pages done, total, what it is doing) and its CPU time;
    ``passed()`` says which limit it is past, as the reason the document fails."""

    def __init__(self, limits: TimeLimits, cpu: Callable[[], float | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits, self._cpu, self._clock = limits, cpu, clock
        self.done, self.total, self.activity = 0, 0, ""
        self._start = clock()
        self._used = 0.0
        self._page_start = 0.0
        self._last_change = self._start
        self._counted = False  # CPU time could be read at least once

    def progress(self, done: int, total: int, activity: str = "") -> None:
        if done > self.done:
            self._page_start = self._used
        self.done, self.total, self.activity = max(self.done, done), total, activity

    def used(self) -> float:
        """CPU seconds used so far (wall-clock seconds where CPU time cannot be read)."""
        now = self._clock()
        cpu = self._cpu()
        if cpu is None and self._counted:  # the process has ended: its last reading stands
            return self._used
        self._counted = self._counted or cpu is not None
        used = now - self._start if cpu is None else cpu
        if used > self._used:
            self._used, self._last_change = used, now
        return self._used

    def passed(self) -> str | None:
        """The reason the parse must stop, or None while it is within its limits."""
        used = self.used()
        page_limit = self.limits.page_seconds
        if used - self._page_start > page_limit:
            where = f"{self._what()} page {self._page()} of {self.total}" if self.total else "parsing"
            return (f"{where} took more than {_seconds(page_limit)} of CPU time, the limit for "
                    f"{'one page' if self.total else 'a document'} ({PAGE_SETTING})")
        budget = self.limits.budget(self.total)
        if self.total and used > budget:
            return (f"parsing the document's {self.total} pages took more than {_seconds(budget)} of CPU time, "
                    f"its budget ({self.total} × {ALLOWANCE_SETTING}="
                    f"{self.limits.page_allowance_seconds:g}, at most {DOCUMENT_SETTING}="
                    f"{self.limits.document_seconds:g}); it stopped during {self._what()} page {self._page()}")
        stall = max(page_limit, STALL_SECONDS)
        if self._clock() - self._last_change > stall:
            where = f" during {self._what()} page {self._page()} of {self.total}" if self.total else ""
            return (f"the parser stopped making progress{where}: it used no CPU time for {_seconds(stall)} "
                    f"({PAGE_SETTING}, at least {STALL_SECONDS:g})")
        return None

    def _page(self) -> int:
        return min(self.done + 1, self.total) if self.total else self.done + 1

    def _what(self) -> str:
        return "OCR of" if self.activity == "OCR" else "parsing"


def _seconds(value: float) -> str:
    return f"{value:g} second{'' if value == 1 else 's'}"

"""Per-page progress of a parse (OCR is slow: pages done / total, visible while ``PARSING``).

A parser calls ``report(done, total)``; whoever runs it sets the reporter for its context (the
isolated child sends it through its pipe, see isolation.py). Without a reporter nothing happens,
and a failing reporter never fails a parse."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

Reporter = Callable[[int, int], None]
_reporter: ContextVar[Reporter | None] = ContextVar("ultimate_rag_parse_progress", default=None)


def set_reporter(reporter: Reporter | None) -> None:
    _reporter.set(reporter)


def report(done: int, total: int) -> None:
    reporter = _reporter.get()
    if reporter is None:
        return
    try:
        reporter(done, total)
    except Exception:  # progress is a courtesy: a closed pipe or a lost lease is not the parser's error
        pass

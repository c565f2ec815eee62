"""Per-page progress of a parse (OCR is slow: pages done / total, visible while ``PARSING``).

A parser calls ``report(done, total)`` before each page, and ``doing("OCR")`` when the page is
read by OCR (a time limit then names OCR and the page); whoever runs it sets the reporter for its
context (the isolated child sends it through its pipe, see isolation.py). Without a reporter
nothing happens, and a failing reporter never fails a parse."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

Reporter = Callable[[int, int, str], None]  # done, total, activity ("" or "OCR")
_reporter: ContextVar[Reporter | None] = ContextVar("ultimate_rag_parse_progress", default=None)
_position: ContextVar[tuple[int, int]] = ContextVar("ultimate_rag_parse_position", default=(0, 0))


def set_reporter(reporter: Reporter | None) -> None:
    _reporter.set(reporter)


def report(done: int, total: int) -> None:
    _position.set((done, total))
    _emit(done, total, "")


def doing(activity: str) -> None:
    """What the current page is going through (``"OCR"``), at the last reported position."""
    _emit(*_position.get(), activity)


def _emit(done: int, total: int, activity: str) -> None:
    reporter = _reporter.get()
    if reporter is None:
        return
    try:
        reporter(done, total, activity)
    except Exception:  # progress is a courtesy: a closed pipe or a lost lease is not the parser's error
        pass

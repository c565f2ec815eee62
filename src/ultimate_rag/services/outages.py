"""One rule for every loop of a worker under an outage (the job loop's claims, the connector syncs,
the embedding-model migration, the janitor, the sparse backfill): when a dependency cannot be
reached (``failures.is_outage``), the loop logs one warning without a traceback, waits and tries
again; when it answers again, one line says so. Anything else is a defect and keeps its traceback."""

from __future__ import annotations

import logging

from .failures import explain


class OutageLog:
    def __init__(self, what: str, logger: logging.Logger) -> None:
        self.what = what  # e.g. "janitor pass", "claiming jobs"
        self._log = logger
        self.down = False

    def failed(self, exc: BaseException) -> None:
        """Log a failed pass: an outage once (until it ends), anything else with its traceback."""
        failure = explain(exc)
        if not failure.outage:
            self._log.error("%s failed; trying again: %s", self.what, failure.detail, exc_info=exc)
            return
        if not self.down:
            self._log.warning("%s: %s, waiting for it [%s]", self.what, failure.reason, failure.detail)
        self.down = True

    def succeeded(self) -> None:
        if self.down:
            self._log.info("%s: working again", self.what)
        self.down = False

"""How a process counts the stop signals it receives (SIGTERM, SIGINT).

One stop usually arrives as several signals at once: Ctrl-C in a terminal, systemd with
``KillMode=control-group`` and a container init that signals the whole process group each deliver
the signal to every worker directly, and ``ultimate-rag up`` forwards one more to each of its
workers the moment it hears it. Signals that arrive within ``SAME_STOP_SECONDS`` of the last one
that counted are therefore the same stop. A signal after that window asks for more:

1. the first: stop taking work, let in-flight jobs finish within the grace period, hand back the rest;
2. a later second: hand every in-flight job back now (no attempt is burnt);
3. a later third: leave at once (the leases then expire and other workers take the jobs over).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import IntEnum

SAME_STOP_SECONDS = 2.0


class StopLevel(IntEnum):
    FINISH = 1  # finish in-flight work within the grace period, then hand back the rest
    HAND_BACK = 2  # hand every in-flight job back now
    EXIT = 3  # leave now


class StopSignals:
    def __init__(self, window: float = SAME_STOP_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self._clock = clock
        self._last: float | None = None
        self.level: StopLevel | None = None

    def receive(self) -> StopLevel | None:
        """The stop level this signal asks for, or None when it belongs to the stop already counted."""
        now = self._clock()
        if self._last is not None and now - self._last < self.window:
            return None
        self._last = now
        self.level = StopLevel(min((self.level or 0) + 1, StopLevel.EXIT))
        return self.level

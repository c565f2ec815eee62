"""A leased job's own end, as its lease sees it (``Lease.end``): see ``WorkEnd``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class WorkEnd:
    """Whether a lease's work has committed its own end (its job ended: READY, DELETED, OUTDATED).
    The job row then no longer holds the lease, so a renewal fails; that is the work finishing
    (its post-commit cleanup still to run), not a lost lease. Each transaction of the work that
    may end it runs inside ``writing()``; a renewal refused meanwhile waits for it (``settled``)."""

    __slots__ = ("_idle", "_writes", "ended")

    def __init__(self) -> None:
        self.ended = False
        self._writes = 0
        self._idle: asyncio.Event | None = None

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Around a transaction that may end the job; call ``finished()`` inside this block once
        that transaction has committed an end."""
        if self._idle is None:
            self._idle = asyncio.Event()
        self._writes += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._writes -= 1
            if self._writes == 0:
                self._idle.set()

    def finished(self) -> None:
        """The work's end is written (called once the transaction that wrote it committed)."""
        self.ended = True

    async def settled(self) -> bool:
        """Whether the work ended its lease itself, once no write that may end it is in flight."""
        while self._writes and self._idle is not None:
            await self._idle.wait()
        return self.ended

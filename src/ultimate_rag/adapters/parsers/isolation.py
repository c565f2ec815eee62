"""Parsing in a child process with a time limit and a memory bound.

One parse = one short-lived process forked from a ``forkserver`` that has the parser libraries
imported already (a fork costs milliseconds, not an interpreter start). The child caps its own
address space (``RLIMIT_AS``) and CPU time (``RLIMIT_CPU``), parses, and sends the ParsedDocument
back through a pipe. The parent waits off the event loop; past a time limit (``parse_time.py``:
the child's CPU time per page and per document, not wall-clock time), or when the job is
cancelled, it kills the child. A child that runs out of memory, crashes (a segfault in a native
library) or is killed leaves the worker and its other jobs untouched: the document fails with a
readable reason instead. The forkserver and its children never see a secret: they run with
an allow-listed environment (``child_env``), not the worker's.

Two kinds of parse run in a thread instead: parsers that are not built in (tests inject their
own), and plain text up to ``INLINE_TEXT_MAX_BYTES`` (up to ``offload.SMALL_WORK``: on the event
loop itself). Decoding text is linear in its size, runs no
native library, and that much of it needs a few MB: nothing a child's limits would catch, while a
child costs ~10 ms of forking on a quiet machine and, niced below a busy model, hundreds of
milliseconds of waiting on a loaded one.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import Any, cast

from ultimate_rag.domain.errors import InvalidDocumentError, UltimateRagError
from ultimate_rag.domain.models import DocumentSource, ParsedDocument
from ultimate_rag.domain.ports import Parser
from ultimate_rag.offload import SMALL_WORK

from . import child_env, progress
from .limits import ParseLimits
from .parse_time import TimeLimits, Watch, cpu_ceiling, cpu_seconds
from .sanitize import sanitize_parsed

_BUILTIN_PREFIX = "ultimate_rag.adapters.parsers."
# the built-in parsers whose parse of a small file runs in a thread (see the module docstring)
INLINE_PARSERS = frozenset({"text"})
INLINE_TEXT_MAX_BYTES = 1 << 20
_context: Any = None
_context_lock = threading.Lock()


def check_parsed(parsed: ParsedDocument, limits: ParseLimits) -> ParsedDocument:
    """Every parse result passes here: its text made storable (sanitize.py), then the limits that
    apply to every format once its text is known."""
    parsed = sanitize_parsed(parsed)
    chars = sum(len(block.text) for block in parsed.blocks)
    if chars > limits.max_text_chars:
        raise InvalidDocumentError(
            f"the document's text has {chars} characters, more than the limit of {limits.max_text_chars}")
    return parsed


class ParseRunner:
    """Runs ``parser.parse(source)`` isolated (default) or in a thread (``isolate=False``)."""

    def __init__(self, limits: ParseLimits | None = None, *, timeout_seconds: float = 300.0,
                 page_allowance_seconds: float = 120.0, document_timeout_seconds: float = 14_400.0,
                 memory_limit_mb: int = 2048, isolate: bool = True) -> None:
        """Time limits (parse_time.py): ``timeout_seconds`` of CPU per page (or per parse without
        pages), ``page_allowance_seconds`` × pages for the document, at most
        ``document_timeout_seconds``."""
        self.limits = limits or ParseLimits()
        self.timeout = timeout_seconds
        self.times = TimeLimits(timeout_seconds, page_allowance_seconds, document_timeout_seconds)
        self.memory_bytes = memory_limit_mb * 1024 * 1024 if memory_limit_mb > 0 else 0
        self.isolate = isolate

    async def parse(self, parser: Parser, source: DocumentSource,
                    on_progress: Callable[[int, int], Awaitable[None]] | None = None) -> ParsedDocument:
        """``on_progress(done, total)``: the parser's per-page progress (parsers call
        ``progress.report``), awaited one at a time and never after this returns."""
        if self._runs_on_the_loop(parser, source):  # a few kilobytes of text: no pages to report
            return check_parsed(parser.parse(source), self.limits)
        pump = _ProgressPump(on_progress)
        try:
            if not self.runs_isolated(parser, source):
                def run() -> ParsedDocument:
                    progress.set_reporter(lambda done, total, _: pump.notify(done, total))  # this thread only
                    return parser.parse(source)

                return check_parsed(await asyncio.to_thread(run), self.limits)
            return await self._isolated(parser.name, source, pump)  # the child ran check_parsed already
        finally:
            await pump.close()

    @staticmethod
    def _runs_on_the_loop(parser: Parser, source: DocumentSource) -> bool:
        """A small plain-text file: decoding it costs less than a hop to a thread (offload.py)."""
        return _inline_text(parser, source, SMALL_WORK)

    def runs_isolated(self, parser: Parser, source: DocumentSource) -> bool:
        if not self.isolate or not type(parser).__module__.startswith(_BUILTIN_PREFIX):
            return False
        return not _inline_text(parser, source, INLINE_TEXT_MAX_BYTES)

    async def _isolated(self, name: str, source: DocumentSource, pump: _ProgressPump) -> ParsedDocument:
        ctx = _mp_context()
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_child, name=f"{_CHILD_PREFIX}{name}", daemon=True,
                              args=(send, name, source, self.limits, self.memory_bytes, self.times))
        stop = threading.Event()
        # Starting writes the source to the child, so it runs off the event loop; a cancellation
        # meanwhile waits for the start to finish, or the child would be started and never killed.
        starting = asyncio.ensure_future(asyncio.to_thread(process.start))
        try:
            await asyncio.shield(starting)
            send.close()
            pid = process.pid
            watch = Watch(self.times, lambda: cpu_seconds(pid) if pid is not None else None)
            outcome = await asyncio.to_thread(_wait, receive, process, watch, stop, pump.notify)
        finally:
            stop.set()
            if not starting.done():
                await asyncio.wait({starting})
            send.close()
            if process.pid is not None:
                if process.is_alive():
                    process.kill()
                await asyncio.to_thread(process.join, 5)
            receive.close()
        if outcome[0] == "died" and process.exitcode == -signal.SIGXCPU:  # the child's backstop acted first
            outcome = ("limit", watch.passed() or "parsing took more CPU time than its limits allow "
                       "(ULTIMATE_RAG_PARSE_TIMEOUT_SECONDS, ULTIMATE_RAG_PARSE_DOCUMENT_TIMEOUT_SECONDS)")
        return self._result(outcome, process.exitcode)

    async def probe_environment(self) -> dict[str, Any]:
        """What a parse child sees of the environment: ``os.environ`` and ``/proc/self/environ``
        (for diagnostics and the test that no secret reaches it)."""
        ctx = _mp_context()
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_report_environment, name=f"{_CHILD_PREFIX}probe", daemon=True, args=(send,))
        await asyncio.to_thread(process.start)
        send.close()
        try:
            wall = Watch(TimeLimits(self.timeout), lambda: None)  # wall-clock time: nothing to read
            outcome = await asyncio.to_thread(_wait, receive, process, wall, threading.Event())
        finally:
            if process.is_alive():
                process.kill()
            await asyncio.to_thread(process.join, 5)
            receive.close()
        if outcome[0] != "ok":
            raise InvalidDocumentError("the environment probe gave no answer")
        environment: dict[str, Any] = outcome[1]
        return environment

    def _result(self, outcome: tuple[str, Any], exitcode: int | None) -> ParsedDocument:
        kind, value = outcome
        if kind == "limit":
            raise InvalidDocumentError(str(value))
        if kind == "ok":
            parsed: ParsedDocument = value
            return parsed
        if kind == "memory":
            raise InvalidDocumentError(
                f"parsing needs more memory than the limit of {self.memory_bytes // (1024 * 1024)} MB")
        if kind == "error":
            raise value
        if kind == "died":
            what = f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit code {exitcode}"
            raise InvalidDocumentError(f"the parser process crashed on this file ({what})")
        raise InvalidDocumentError("the parser process ended without a result")


def _inline_text(parser: Parser, source: DocumentSource, limit: int) -> bool:
    """A built-in parser that only decodes text, on a file of at most ``limit`` bytes."""
    return (parser.name in INLINE_PARSERS and type(parser).__module__.startswith(_BUILTIN_PREFIX)
            and len(source.content) <= limit)


class _ProgressPump:
    """Carries progress from the thread that waits on the child to the event loop: the latest
    (done, total) is kept, and one task reports it, so reports never pile up or outlive the parse."""

    def __init__(self, on_progress: Callable[[int, int], Awaitable[None]] | None) -> None:
        self._on_progress = on_progress
        self._latest: tuple[int, int] | None = None
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = self._loop.create_task(self._run()) if on_progress is not None else None

    def notify(self, done: int, total: int) -> None:  # any thread
        if self._task is None:
            return
        self._latest = (done, total)
        self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        assert self._on_progress is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            latest, self._latest = self._latest, None
            if latest is not None:
                try:
                    await self._on_progress(*latest)
                except Exception:  # progress is a courtesy; the parse result decides the outcome
                    pass

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _wait(conn: Connection, process: Any, watch: Watch, stop: threading.Event,
          on_progress: Callable[[int, int], None] | None = None) -> tuple[str, Any]:
    """The child's message; ("died", None) when it ended without one; ("limit", reason) when it
    is past a time limit (``watch``, parse_time.py); ("stopped", None) when ``stop`` is set.
    Progress messages (``("progress", done, total, activity)``) go to the watch and to
    ``on_progress`` on the way."""
    while not stop.is_set():
        reason = watch.passed()
        if reason is not None:
            return ("limit", reason)
        try:
            if conn.poll(0.1):
                message = conn.recv()
                if _is_progress(message):
                    watch.progress(message[1], message[2], message[3] if len(message) > 3 else "")
                    if on_progress is not None:
                        on_progress(message[1], message[2])
                    continue
                return cast("tuple[str, Any]", message)  # the child sends (kind, value)
        except (EOFError, OSError):
            return ("died", None)
        if not process.is_alive():
            try:
                while conn.poll(0):
                    message = conn.recv()
                    if not _is_progress(message):
                        return cast("tuple[str, Any]", message)
            except (EOFError, OSError):
                pass
            return ("died", None)
    return ("stopped", None)


def _is_progress(message: object) -> bool:
    return isinstance(message, tuple) and len(message) >= 3 and message[0] == "progress"


_CHILD_PREFIX = "ultimate-rag-parse-"


def _without_main(original: Any) -> Any:
    """multiprocessing re-imports the parent's ``__main__`` in every child it starts (for a worker:
    the whole application, seconds per parse; for a script without a main guard: a crash). A parse
    child needs only this module, so its preparation leaves the main module out."""
    def prepare(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        if name.startswith(_CHILD_PREFIX):
            data.pop("init_main_from_name", None)
            data.pop("init_main_from_path", None)
        return data

    prepare.wrapped = original  # type: ignore[attr-defined]  # a mark on a function: wrapped once
    return prepare


def _ignore_stop_signals() -> None:
    """A stop signal for the worker's process group (Ctrl-C, a service manager's stop) reaches its
    parse children too; their worker decides when a parse ends (it kills the child when it gives
    the job up), and a child killed by the worker's stop would read as a file that crashes its
    parser, failing the document."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def _mp_context() -> Any:
    global _context
    with _context_lock:
        if _context is None:
            from multiprocessing import spawn

            child_env.install()  # the forkserver is started with an environment without secrets
            if not hasattr(spawn.get_preparation_data, "wrapped"):
                spawn.get_preparation_data = _without_main(spawn.get_preparation_data)
            method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
            ctx = multiprocessing.get_context(method)
            if method == "forkserver":
                # every parser module is imported before the child's memory limit applies (a
                # module loaded after it may not find the address space to map its library)
                ctx.set_forkserver_preload([__name__, "ultimate_rag.adapters.parsers.registry",
                                            "ultimate_rag.adapters.parsers.pdf",
                                            "ultimate_rag.adapters.parsers.docx",
                                            "ultimate_rag.adapters.parsers.html",
                                            "ultimate_rag.adapters.parsers.tabular",
                                            "ultimate_rag.adapters.parsers.image",
                                            "ultimate_rag.adapters.parsers.slides",
                                            "ultimate_rag.adapters.parsers.sheets",
                                            "ultimate_rag.adapters.parsers.epub",
                                            "ultimate_rag.adapters.parsers.odf",
                                            "ultimate_rag.adapters.parsers.preload"])
            _context = ctx
        return _context


def _child(conn: Connection, name: str, source: DocumentSource, limits: ParseLimits, memory_bytes: int,
           times: TimeLimits) -> None:
    import resource

    child_env.scrub()  # also when the forkserver was started by someone else, with everything
    _ignore_stop_signals()
    try:
        os.nice(5)  # parsing yields to the worker's own event loop
    except OSError:
        pass
    _few_malloc_arenas()
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # a backstop past the parent's limits (parse_time.py), moved on with every page done
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]

    def cpu_limit(seconds: float) -> None:
        soft = max(1, int(seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))

    cpu_limit(cpu_ceiling(times, 0.0, 0))

    def report(done: int, total: int, activity: str) -> None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_limit(cpu_ceiling(times, used.ru_utime + used.ru_stime, total))
        conn.send(("progress", done, total, activity))

    progress.set_reporter(report)
    try:
        from .registry import default_registry

        parser = next(p for p in default_registry(limits).parsers if p.name == name)
        message: tuple[str, Any] = ("ok", check_parsed(parser.parse(source), limits))
    except MemoryError:
        message = ("memory", None)
    except UltimateRagError as exc:
        message = ("error", exc)
    except Exception as exc:
        message = ("error", InvalidDocumentError(f"could not parse the file: {exc.__class__.__name__}: {exc}"[:500]))
    try:
        _send(conn, message)
    finally:
        conn.close()


def _few_malloc_arenas() -> None:
    """glibc gives each thread that allocates its own malloc arena, reserving 64 MB of address
    space apiece; OCR's thread pools (onnxruntime, OpenCV, OpenBLAS) would spend ~400 MB of the
    address-space limit on reservations alone. Two arenas are plenty for one parse."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, 2)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def _report_environment(conn: Connection) -> None:
    child_env.scrub()
    try:
        with open("/proc/self/environ", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except OSError:
        raw = ""
    conn.send(("ok", {"os.environ": dict(os.environ), "proc": raw}))
    conn.close()


def _send(conn: Connection, message: tuple[str, Any]) -> None:
    """Send the outcome. When the worker that started this child is gone (killed), nobody reads
    any more: the child then ends quietly instead of printing a BrokenPipeError traceback."""
    try:
        try:
            conn.send(message)
        except MemoryError:
            conn.send(("memory", None))
    except OSError:  # BrokenPipeError, ConnectionResetError: the reading end is closed
        pass

"""What the HTTP commands share: where the server is and which key to use, the knowledge base by
name or id, terminal output (rich on a TTY, plain lines when piped), and errors as one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from rich.console import Console

from ..client import (
    DEFAULT_URL,
    ApiError,
    AsyncClient,
    KnowledgeBase,
    NotFound,
    RetryPolicy,
    TransportError,
    UltimateRagError,
)


class CliError(Exception):
    """A message for the user, and the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def add_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help=f"the server (default: ULTIMATE_RAG_URL or {DEFAULT_URL})")
    p.add_argument("--key", default=None,
                   help="an API key (default: ULTIMATE_RAG_API_KEY, else {data dir}/admin.key)")


def server_url(args: argparse.Namespace) -> str:
    return str(args.url or os.environ.get("ULTIMATE_RAG_URL") or DEFAULT_URL)


def api_key(args: argparse.Namespace) -> str:
    if args.key:
        return str(args.key)
    if os.environ.get("ULTIMATE_RAG_API_KEY"):
        return os.environ["ULTIMATE_RAG_API_KEY"]
    path = Path(os.environ.get("ULTIMATE_RAG_DATA_DIR") or "data") / "admin.key"
    try:
        key = path.read_text().strip()
    except OSError:
        key = ""
    if not key:
        raise CliError(f"no API key: pass --key, set ULTIMATE_RAG_API_KEY, or run where {path} exists", 2)
    return key


def connect(args: argparse.Namespace) -> AsyncClient:
    # a person is waiting: a server that cannot be reached is reported within seconds
    return AsyncClient(server_url(args), api_key(args), retry=RetryPolicy(retries=3))


async def knowledge_base(rag: AsyncClient, name_or_id: str, *, create: bool = False) -> KnowledgeBase:
    try:
        return await rag.find_knowledge_base(name_or_id)
    except NotFound:
        if not create:
            raise CliError(f"knowledge base {name_or_id!r} not found (or not visible to this key); "
                           "--create makes it") from None
    return await rag.create_knowledge_base(name_or_id)


def consoles(quiet: bool = False) -> tuple[Console, Console]:
    """stdout and stderr consoles; ``quiet`` silences stdout. Piped, lines and tables are not cut at
    80 columns (a script reads them whole)."""
    out, err = Console(quiet=quiet, soft_wrap=True), Console(stderr=True, soft_wrap=True)
    for console in (out, err):
        if not console.is_terminal:
            console.width = 1000
    return out, err


def run(work: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command; API and connection errors become one line on stderr and exit status 1;
    Ctrl-C ends it with what it did so far (each command's own summary), "interrupted" and 130."""
    try:
        return asyncio.run(interruptible(work()))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted", file=sys.stderr)
        return 130
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except ApiError as exc:
        print(f"error: {exc.detail} (HTTP {exc.status_code})", file=sys.stderr)
        return 1
    except (TransportError, UltimateRagError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


INTERRUPT_RETRY_SECONDS = 1.0


async def interruptible(command: Coroutine[Any, Any, int]) -> int:
    """``command`` as a task that SIGINT cancels. The signal goes through the event loop's own
    handler, which wakes the loop at once whichever thread the kernel gave the signal to (with the
    interpreter's handler alone it waits until the loop next wakes). A cancellation that does not
    end the command — one lost inside a library on its way — is asked again every
    ``INTERRUPT_RETRY_SECONDS``: once seen under load, an ``ingest --wait`` went on waiting after Ctrl-C.
    A second Ctrl-C is the interpreter's again: it stops the command wherever it is."""
    loop = asyncio.get_running_loop()
    job = asyncio.ensure_future(command)
    interrupted = asyncio.Event()

    def interrupt() -> None:
        job.cancel()
        interrupted.set()
        loop.remove_signal_handler(signal.SIGINT)  # back to the interpreter's KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (NotImplementedError, RuntimeError):  # no signal handlers on this loop: the interpreter's
        return await job
    try:
        asked = asyncio.ensure_future(interrupted.wait())
        await asyncio.wait({job, asked}, return_when=asyncio.FIRST_COMPLETED)
        asked.cancel()
        while not job.done():
            await asyncio.wait({job}, timeout=INTERRUPT_RETRY_SECONDS)
            if not job.done():
                job.cancel()
        return job.result()  # CancelledError when interrupted
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if job.done() and not job.cancelled():
            job.exception()  # seen: a second Ctrl-C's KeyboardInterrupt has gone up through the loop already


def citation_line(raw: dict[str, Any]) -> str:
    from ..client import Citation

    return str(Citation.from_json(raw))


def snippet(text: str, width: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"

"""A stop signal for a worker's process group (Ctrl-C, systemd, a container init) reaches its parse
children and its forkserver too: a parse in flight must not die of it (the document would read as
a file that crashes its parser), and a worker that dies while its forkserver starts a child must
not leave a traceback behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from uuid import uuid4

import psutil
import pymupdf

from ultimate_rag.adapters.parsers.isolation import ParseRunner, _mp_context
from ultimate_rag.adapters.parsers.registry import default_registry
from ultimate_rag.domain.models import DocumentSource


def _many_pages(pages: int) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page()
        for line in range(40):
            page.insert_text((72, 72 + 16 * line), f"Page {n} line {line}: the ferry left the harbour at dawn.")
    return doc.tobytes()


def _parse_children() -> list[psutil.Process]:
    """The forkserver's children: the parse children it forked for this process."""
    found = []
    for child in psutil.Process().children():
        try:
            if "forkserver" in " ".join(child.cmdline()):
                found.extend(child.children())
        except psutil.Error:
            pass
    return found


async def test_a_parse_in_flight_outlives_the_process_group_s_stop_signals() -> None:
    runner = ParseRunner()
    registry = default_registry(runner.limits)
    source = DocumentSource(uuid4(), "long.pdf", "application/pdf", _many_pages(150))
    parser = registry.resolve(source)
    signalled: list[int] = []

    async def on_progress(done: int, total: int) -> None:
        if signalled or done == 0:
            return
        for child in _parse_children():  # what Ctrl-C (SIGINT) and a service manager (SIGTERM) send
            child.send_signal(signal.SIGINT)
            child.send_signal(signal.SIGTERM)
            signalled.append(child.pid)

    parsed = await runner.parse(parser, source, on_progress)
    assert signalled, "no parse child was running when the signals were sent"
    assert "Page 149 line 39" in "\n".join(block.text for block in parsed.blocks)


def test_a_worker_that_dies_while_a_child_is_started_leaves_no_traceback(tmp_path) -> None:
    """The forkserver forks a child for a request whose sender is gone before it sent the work
    (the worker was killed between the two): the child finds the pipe closed."""
    script = textwrap.dedent("""
        import os
        from multiprocessing import forkserver
        from ultimate_rag.adapters.parsers.isolation import _mp_context
        ctx = _mp_context()
        forkserver.ensure_running()
        parent_r, parent_w = forkserver._forkserver.connect_to_new_process([])
        os.close(parent_w)  # the worker is gone: nothing is sent
        pid = forkserver.read_signed(parent_r)
        returncode = forkserver.read_signed(parent_r)  # the child's end
        print("child", pid, "exited", returncode, flush=True)
    """)
    assert _mp_context() is not None
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stderr
    assert "exited" in result.stdout
    assert "Traceback" not in result.stderr and "EOFError" not in result.stderr, result.stderr

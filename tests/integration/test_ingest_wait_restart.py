"""``ultimate-rag ingest --wait`` (a real process) through a restart of the server it talks to: the
API served by a real uvicorn on a loopback port is stopped (connections refused, the event stream
cut) and started again on the same port, in this process, so the restart costs milliseconds rather
than a deployment's start-up. The command says the server is gone, says it is back, and ends with
every document READY and its summary, exit 0."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.testing.eventually import eventually

from ..conftest import ADMIN_KEY


@contextlib.asynccontextmanager
async def served(container: Any, port: int) -> AsyncIterator[None]:
    from ultimate_rag.api.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(container=container), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off", timeout_graceful_shutdown=1))
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, what="the server started")
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=40)


async def test_ingest_wait_goes_on_through_a_server_restart(container, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(2):
        (folder / f"log-{i}.md").write_text(f"# Log {i}\n\nThe lighthouse was lit at dusk on day {i}.\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_URL": f"http://127.0.0.1:{port}", "ULTIMATE_RAG_API_KEY": ADMIN_KEY,
            "ULTIMATE_RAG_STATE_DIR": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
    async with served(container, port):
        command = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ultimate_rag.cli", "ingest", str(folder), "--kb", "restart", "--create", "--wait",
            "--timeout", "120", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert command.stdout is not None and command.stderr is not None
        lines = [(await asyncio.wait_for(command.stdout.readline(), 120)).decode() for _ in range(3)]
        assert sum(line.startswith("uploaded ") for line in lines) == 2, lines  # the plan, then the uploads
    # stopped: no worker ran, so the documents are still PENDING and the command is waiting
    gone = (await asyncio.wait_for(command.stderr.readline(), 120)).decode()
    assert "the server cannot be reached" in gone, gone
    async with served(container, port):
        await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle()
        out, err = (b.decode() for b in await asyncio.wait_for(command.communicate(), 120))
    assert command.returncode == 0, out + err
    assert "the server is back" in err and "Traceback" not in err
    assert out.count("READY logs/log-") == 2 and "ingest summary" in out

"""The worker process runs its event loop on uvloop (a dependency on Linux): see worker.py."""

from __future__ import annotations

import asyncio

from ultimate_rag.worker import run_event_loop


def test_the_worker_process_runs_on_uvloop() -> None:
    async def loop_module() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert run_event_loop(loop_module()).startswith("uvloop")

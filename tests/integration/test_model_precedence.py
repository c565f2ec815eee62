"""A worker process's own steps yield to the local model's threads (precedence.py). Run in a child
process: the priorities it changes are the whole process's (this test process stays as it is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import asyncio, json, os, threading
from ultimate_rag.adapters.embedders.engine_embedders import apply_engine
from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.embedders.precedence import give_model_precedence

def nice(tid):
    return int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])

def tids():
    return {int(t) for t in os.listdir("/proc/self/task")}

async def main():
    copies = int(os.environ["COPIES"])
    wrapped, _ = apply_engine(LocalE5Embedder(), None, threads=2, local_batch=1, remote_batch=8,
                              max_in_flight=1, max_wait=0.0, copies=copies)
    await asyncio.to_thread(lambda: None)  # a default-executor thread from before: replaced
    base = nice(threading.get_native_id())
    before = tids()
    changed = give_model_precedence(wrapped.model_thread, int(os.environ["INCREMENT"]))
    vectors = await wrapped.embed_documents(["the harbour opens at dawn", "the ferry leaves from pier four"])
    together = threading.Barrier(copies, timeout=60)

    def model_tid():  # one call on each model thread (each held until all arrived)
        together.wait()
        return threading.get_native_id()

    executor = wrapped.model_thread.executor()
    models = [f.result() for f in [executor.submit(model_tid) for _ in range(copies)]]
    step = await asyncio.to_thread(threading.get_native_id)
    born = tids() - before - set(models) - {step}  # the models' OpenMP teams, started by their threads
    print(json.dumps({"changed": changed, "base": base, "main": nice(threading.get_native_id()),
                      "models": [nice(m) for m in set(models)], "step": nice(step),
                      "team": [nice(t) for t in born], "vectors": len(vectors)}))
    await wrapped.aclose()

asyncio.run(main())
'''


def _run(increment: int, copies: int = 1) -> dict:
    env = {**os.environ, "INCREMENT": str(increment), "COPIES": str(copies)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="per-thread nice values are Linux's")
@pytest.mark.parametrize("copies", [1, 2])
def test_the_workers_own_steps_run_below_the_model_threads(copies: int) -> None:
    seen = _run(5, copies)
    base = seen["base"]
    assert seen["changed"] and seen["vectors"] == 2
    assert seen["models"] == [base] * copies  # every model thread keeps the process's priority ...
    if copies == 1:  # ... and so does its OpenMP team (copies of one thread each have none)
        assert seen["team"] and all(n == base for n in seen["team"])
    assert seen["main"] == min(19, base + 5)  # the event loop's thread goes below them
    assert seen["step"] == min(19, base + 5)  # and so do the threads it starts from now on


def test_precedence_zero_changes_nothing() -> None:
    seen = _run(0)
    assert not seen["changed"]
    assert seen["models"] == [seen["main"]] == [seen["step"]] == [seen["base"]]

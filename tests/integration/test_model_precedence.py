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
from ultimate_rag.adapters.embedders.engined import apply_engine
from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.embedders.precedence import give_model_precedence

def nice(tid):
    return int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])

def tids():
    return {int(t) for t in os.listdir("/proc/self/task")}

async def main():
    wrapped, _ = apply_engine(LocalE5Embedder(), None, threads=2, local_batch=1, remote_batch=8,
                              max_in_flight=1, max_wait=0.0)
    await asyncio.to_thread(lambda: None)  # a default-executor thread from before: replaced
    base = nice(threading.get_native_id())
    before = tids()
    changed = give_model_precedence(wrapped.model_thread, int(os.environ["INCREMENT"]))
    vectors = await wrapped.embed_documents(["the harbour opens at dawn", "the ferry leaves from pier four"])
    model = await wrapped.model_thread.call(threading.get_native_id)
    step = await asyncio.to_thread(threading.get_native_id)
    born = tids() - before - {model, step}  # the model's OpenMP team, started by its thread
    print(json.dumps({"changed": changed, "base": base, "main": nice(threading.get_native_id()),
                      "model": nice(model), "step": nice(step), "team": [nice(t) for t in born],
                      "vectors": len(vectors)}))
    await wrapped.aclose()

asyncio.run(main())
'''


def _run(increment: int) -> dict:
    env = {**os.environ, "INCREMENT": str(increment)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="per-thread nice values are Linux's")
def test_the_workers_own_steps_run_below_the_model_threads() -> None:
    seen = _run(5)
    base = seen["base"]
    assert seen["changed"] and seen["vectors"] == 2
    assert seen["model"] == base  # the model thread keeps the process's priority ...
    assert seen["team"] and all(n == base for n in seen["team"])  # ... and so does its OpenMP team
    assert seen["main"] == min(19, base + 5)  # the event loop's thread goes below it
    assert seen["step"] == min(19, base + 5)  # and so do the threads it starts from now on


def test_precedence_zero_changes_nothing() -> None:
    seen = _run(0)
    assert not seen["changed"]
    assert seen["main"] == seen["model"] == seen["step"] == seen["base"]

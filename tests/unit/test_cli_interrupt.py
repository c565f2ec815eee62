"""Ctrl-C ends an HTTP command (cli_http/common.py ``run``): its own summary, "interrupted" on
stderr, exit status 130 — also when a library on the way swallows the first cancellation (seen
once under load: ``ingest --wait`` went on waiting after Ctrl-C), and without the loop having to
wake for another reason first; a second Ctrl-C stops a command stuck where no cancellation can
reach it. In a child process: the signal is the process's."""

from __future__ import annotations

import signal
import subprocess
import sys

_COMMAND = """
import asyncio, sys, time
from ultimate_rag.cli_http.common import run

async def command() -> int:
    swallowed = 0
    while True:
        try:
            print("waiting", flush=True)
            await asyncio.sleep(3600)  # nothing else would wake the loop for an hour
        except asyncio.CancelledError:
            swallowed += 1
            if sys.argv[1] == "stuck":  # blocked outside the event loop: no cancellation reaches it
                print("stuck", flush=True)
                time.sleep(3600)
            if swallowed == int(sys.argv[1]):  # the command's own ending: its summary, then the cancellation on
                print("summary", flush=True)
                raise
            # a cancellation lost on its way (a library that catches it): the command goes on

sys.exit(run(command))
"""


def _interrupted(swallowed_before_ending: int | str) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen([sys.executable, "-c", _COMMAND, str(swallowed_before_ending)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "waiting\n"
    child.send_signal(signal.SIGINT)
    seen = "waiting\n"
    if swallowed_before_ending == "stuck":
        seen += child.stdout.readline()
        assert seen.endswith("stuck\n"), seen
        child.send_signal(signal.SIGINT)  # the second Ctrl-C
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(child.args, child.returncode, seen + out, err)


def test_ctrl_c_ends_a_command_with_its_summary_and_130() -> None:
    done = _interrupted(1)
    assert done.returncode == 130, done
    assert done.stdout == "waiting\nsummary\n" and done.stderr.strip() == "interrupted", done


def test_a_cancellation_lost_on_its_way_is_asked_again_until_the_command_ends() -> None:
    done = _interrupted(3)  # the first two are swallowed
    assert done.returncode == 130, done
    assert done.stdout == "waiting\nwaiting\nwaiting\nsummary\n" and done.stderr.strip() == "interrupted", done


def test_a_second_ctrl_c_stops_a_command_that_no_cancellation_reaches() -> None:
    done = _interrupted("stuck")
    assert done.returncode == 130, done
    assert done.stdout == "waiting\nstuck\n" and done.stderr.strip().endswith("interrupted"), done

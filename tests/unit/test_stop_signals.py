"""Stop signals that arrive together are one stop; later ones escalate (stop_signals.py)."""

from __future__ import annotations

from ultimate_rag.stop_signals import StopLevel, StopSignals


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_group_signal_and_the_forwarded_one_are_one_stop() -> None:
    clock = Clock()
    signals = StopSignals(window=2.0, clock=clock)
    assert signals.receive() == StopLevel.FINISH  # the process group's SIGINT
    clock.now += 0.01
    assert signals.receive() is None  # `up`'s forwarded SIGTERM
    clock.now += 1.5
    assert signals.receive() is None  # still within the window of the first


def test_later_signals_hand_back_then_exit() -> None:
    clock = Clock()
    signals = StopSignals(window=2.0, clock=clock)
    assert signals.receive() == StopLevel.FINISH
    clock.now += 5
    assert signals.receive() == StopLevel.HAND_BACK
    clock.now += 0.1
    assert signals.receive() is None  # the second Ctrl-C's own forwarded copy
    clock.now += 5
    assert signals.receive() == StopLevel.EXIT
    clock.now += 5
    assert signals.receive() == StopLevel.EXIT

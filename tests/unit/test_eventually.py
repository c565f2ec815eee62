"""The one wait of the test suite: it returns as soon as the condition holds, and past its deadline
fails with the last value seen (or the last error it was told to ignore)."""

from __future__ import annotations

import itertools

import pytest

from ultimate_rag.testing.eventually import eventually, eventually_sync


async def test_returns_the_first_value_that_holds_plain_or_async() -> None:
    counter = itertools.count()
    assert await eventually(lambda: next(counter), lambda n: n >= 3) == 3

    async def probe() -> str:
        return "ready"

    assert await eventually(probe) == "ready"


async def test_past_the_deadline_the_failure_shows_the_last_value() -> None:
    counter = itertools.count()
    with pytest.raises(AssertionError, match=r"the queue drained: condition not met within 0.2s; last value: \d+"):
        await eventually(lambda: next(counter), lambda n: n < 0, timeout=0.2, what="the queue drained")


async def test_listed_errors_mean_not_yet_and_show_in_the_failure() -> None:
    attempts = itertools.count()

    def probe() -> int:
        if next(attempts) < 2:
            raise ConnectionError("not listening yet")
        return 7

    assert await eventually(probe, ignoring=(ConnectionError,)) == 7

    def never() -> int:
        raise ConnectionError("refused")

    with pytest.raises(AssertionError, match="last value: ConnectionError"):
        await eventually(never, timeout=0.1, ignoring=(ConnectionError,))
    with pytest.raises(ConnectionError):  # other errors are not waited out
        await eventually(never, timeout=0.1)


def test_the_blocking_variant_behaves_the_same() -> None:
    counter = itertools.count()
    assert eventually_sync(lambda: next(counter), lambda n: n == 2) == 2
    with pytest.raises(AssertionError, match="last value: False"):
        eventually_sync(lambda: False, timeout=0.1)

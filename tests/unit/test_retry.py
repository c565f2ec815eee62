from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from ultimate_rag.domain.retry import MAX_RETRY_DELAY_SECONDS, backoff_seconds, retry_message


def test_backoff_doubles_without_jitter() -> None:
    assert [backoff_seconds(a, 5.0, jitter=0) for a in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]


def test_backoff_is_capped_at_five_minutes() -> None:
    assert backoff_seconds(20, 5.0, jitter=0) == MAX_RETRY_DELAY_SECONDS == 300.0


@given(st.integers(min_value=1, max_value=64), st.floats(min_value=0, max_value=1000))
def test_jitter_stays_within_ten_percent_and_the_cap(attempt: int, base: float) -> None:
    raw = min(base * 2 ** (attempt - 1), 300.0)
    d = backoff_seconds(attempt, base, rng=random.Random(attempt))
    assert 0 <= d <= 300.0
    assert raw * 0.9 - 1e-9 <= d <= raw * 1.1 + 1e-9


def test_jitter_spreads_retries() -> None:
    rng = random.Random(1)
    assert len({round(backoff_seconds(3, 5.0, rng=rng), 6) for _ in range(20)}) > 10


def test_retry_message() -> None:
    assert retry_message(1, 3, "timeout") == "attempt 1/3 failed temporarily, retrying automatically: timeout"

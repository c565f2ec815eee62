"""Retry policy (SPEC §4): retry_delay x 2^(attempts-1), capped at 300 s, with jitter."""

from __future__ import annotations

import random

MAX_RETRY_DELAY_SECONDS = 300.0


def backoff_seconds(attempt: int, base_delay: float, *, jitter: float = 0.1,
                    rng: random.Random | None = None) -> float:
    """Delay before the next try after ``attempt`` (1-based) failed.

    Full exponential backoff, capped, then multiplied by a factor in [1 - jitter, 1 + jitter] so
    that many documents failing together (a provider outage) do not return in lockstep; the cap
    holds after jitter too.
    """
    raw = min(base_delay * (2.0 ** max(attempt - 1, 0)), MAX_RETRY_DELAY_SECONDS)
    uniform = rng.uniform if rng is not None else random.uniform
    factor = 1.0 + uniform(-jitter, jitter) if jitter else 1.0
    return max(0.0, min(raw * factor, MAX_RETRY_DELAY_SECONDS))


def retry_message(attempt: int, max_attempts: int, error: str) -> str:
    return f"attempt {attempt}/{max_attempts} failed temporarily, retrying automatically: {error}"


# a dependency was unavailable: the attempt is given back (it is not the document's fault)
OUTAGE_TEMPLATE = ("attempt {attempt} was interrupted because {error}; this does not count as a failed attempt, "
                   "retrying automatically in {delay} s")


def outage_message(attempt: int, error: str, delay: float) -> str:
    return OUTAGE_TEMPLATE.format(attempt=attempt, error=error, delay=f"{delay:.0f}")

"""Exponential backoff, the one schedule every retry loop uses."""

from __future__ import annotations

from dataclasses import dataclass


def backoff_delay(base: float, cap: float, attempt: int) -> float:
    """Seconds to wait before retry number `attempt` (1-based): `base`, doubling each time, at most `cap`."""
    return min(base * 2.0 ** max(attempt - 1, 0), cap)


@dataclass(frozen=True)
class RetryPolicy:
    """How many tries in all, and the backoff between them."""

    attempts: int
    base_seconds: float
    cap_seconds: float

    def delay(self, tries: int) -> float:
        """Seconds to wait after the `tries`-th failed try."""
        return backoff_delay(self.base_seconds, self.cap_seconds, tries)


class Backoff:
    """A running schedule: `next()` gives the following delay, `reset()` starts over after a success."""

    def __init__(self, base: float, cap: float) -> None:
        self._base = base
        self._cap = cap
        self._attempt = 0

    def next(self) -> float:
        self._attempt += 1
        return backoff_delay(self._base, self._cap, self._attempt)

    def reset(self) -> None:
        self._attempt = 0

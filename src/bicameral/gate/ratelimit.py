"""Per-sender DM rate limit in fixed one-minute buckets; the owner is never limited."""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum

from bicameral.store.ratelimits import RateLimitStore


class Verdict(Enum):
    ALLOW = "allow"
    WARN = "warn"  # over the limit: tell the sender once
    SILENT = "silent"  # over the limit and already told


class RateLimiter:
    def __init__(self, store: RateLimitStore, per_minute: int, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._per_minute = per_minute
        self._clock = clock

    def check(self, sender_id: str) -> Verdict:
        if self._per_minute <= 0:
            return Verdict.ALLOW
        bucket = int(self._clock() // 60)
        count, warned = self._store.hit(sender_id, bucket)
        if count <= self._per_minute:
            return Verdict.ALLOW
        if warned:
            return Verdict.SILENT
        self._store.mark_warned(sender_id, bucket)
        return Verdict.WARN

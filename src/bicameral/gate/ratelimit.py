"""Rate limits in fixed one-minute buckets, per key (a DM sender, a group member, a group)."""

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

    def check(self, key: str, per_minute: int | None = None) -> Verdict:
        """Count one message against `key`'s limit (the default one unless given; 0 = no limit)."""
        limit = self._per_minute if per_minute is None else per_minute
        if limit <= 0:
            return Verdict.ALLOW
        bucket = int(self._clock() // 60)
        count, warned = self._store.hit(key, bucket)
        if count <= limit:
            return Verdict.ALLOW
        if warned:
            return Verdict.SILENT
        self._store.mark_warned(key, bucket)
        return Verdict.WARN

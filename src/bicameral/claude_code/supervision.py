"""What outlives one CLI process: its stored session id, and the crash budget with its backoff."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from bicameral.store.kv import KeyValueStore


class SessionIds:
    """The persisted CLI session id of one worker, so a restart resumes the same conversation."""

    def __init__(self, kv: KeyValueStore, key: str) -> None:
        self._kv = kv
        self.key = key

    def get(self) -> str | None:
        return self._kv.get(self.key)

    def set(self, session_id: str) -> None:
        if session_id and session_id != self.get():
            self._kv.set(self.key, session_id)

    def confirm(self, session_id: str) -> None:
        """Record that the session completed a turn: losing it from now on loses real context."""
        self.set(session_id)
        if session_id and self._kv.get(self.key + ".confirmed") != session_id:
            self._kv.set(self.key + ".confirmed", session_id)

    def confirmed(self) -> bool:
        current = self.get()
        return current is not None and self._kv.get(self.key + ".confirmed") == current

    def clear(self) -> None:
        self._kv.delete(self.key)
        self._kv.delete(self.key + ".confirmed")


class CrashBudget:
    """Crashes across all workers in a sliding window; spent means the executor gives up."""

    def __init__(self, limit: int, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window_seconds
        self._clock = clock
        self._times: deque[float] = deque()

    def record(self) -> bool:
        """Count a crash; False once `limit` crashes fall inside the window."""
        now = self._clock()
        self._times.append(now)
        while self._times and now - self._times[0] > self.window:
            self._times.popleft()
        return len(self._times) < self.limit

    @property
    def recent(self) -> int:
        return len(self._times)

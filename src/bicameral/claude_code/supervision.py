"""What outlives one CLI process: its stored session id, the crash budget, and the supervisor that respawns it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from bicameral.backoff import backoff_delay
from bicameral.claude_code.failures import Failure, Recovery
from bicameral.claude_code.stream import preview
from bicameral.store.kv import KeyValueStore
from bicameral.types import Clock, Sleep

log = logging.getLogger(__name__)
cc = logging.getLogger("bicameral.cc")


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


class Supervisor:
    """Keeps one worker's process alive: counts crashes, respawns after a backoff, kills a silent turn, gives up."""

    def __init__(
        self,
        name: str,
        budget: CrashBudget,
        *,
        backoff_base: float,
        backoff_cap: float,
        liveness_timeout: float,
        liveness_poll: float,
        on_giveup: Callable[[Failure], Awaitable[None]] | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = name
        self._budget = budget
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._liveness_timeout = liveness_timeout
        self._liveness_poll = liveness_poll
        self._on_giveup = on_giveup
        self._clock = clock
        self._sleep = sleep
        self.failure: Failure | None = None  # set once it gave up
        self.last_crash: Failure | None = None
        self._consecutive = 0
        self._last_activity = clock()
        self._tools_running = 0
        self._respawn: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self._stopped = False

    @property
    def gave_up(self) -> bool:
        return self.failure is not None

    def touch(self) -> None:
        """The process showed a sign of life."""
        self._last_activity = self._clock()

    def tool_activity(self, started: bool) -> None:
        """One of our tools started or finished for this worker: a running tool is not silence."""
        self._tools_running += 1 if started else -1
        self.touch()

    def recovered(self) -> None:
        """A turn completed: the next crash starts the backoff from the bottom again."""
        self._consecutive = 0

    def crashed(self, failure: Failure, respawn: Callable[[], Awaitable[None]]) -> None:
        """Count the crash; run `respawn` after a growing delay, or give up when the budget is spent."""
        self.last_crash = failure
        self._consecutive += 1
        within = self._budget.record()
        log.warning(
            "%s: executor crashed (%s: %s); %d crash(es) in the window",
            self.name, failure.kind, preview(failure.detail), self._budget.recent,
        )
        if failure.recovery is Recovery.GIVE_UP or not within:
            self._give_up(failure)
            return
        if self._stopped:
            return
        delay = backoff_delay(self._backoff_base, self._backoff_cap, self._consecutive)
        self._respawn = asyncio.create_task(self._respawn_after(delay, respawn), name=f"respawn:{self.name}")

    async def wait_for_respawn(self) -> bool:
        """Wait out a scheduled respawn; False when none is pending."""
        if self._respawn is None or self._respawn.done():
            return False
        await asyncio.shield(self._respawn)
        return True

    def watch(self, *, watched: Callable[[], bool], stall: Callable[[float], Awaitable[None]]) -> None:
        """Start the liveness watch (once): `stall(silent_seconds)` when `watched()` and silent past the timeout."""
        if self._watchdog is None and not self._stopped:
            self._watchdog = asyncio.create_task(self._liveness(watched, stall), name=f"liveness:{self.name}")

    def stop(self) -> None:
        self._stopped = True
        for task in (self._respawn, self._watchdog, *self._tasks):
            if task is not None:
                task.cancel()

    async def _respawn_after(self, delay: float, respawn: Callable[[], Awaitable[None]]) -> None:
        cc.info("[CC.respawn] %s in %.1fs", self.name, delay)
        await self._sleep(delay)
        if not self._stopped and self.failure is None:
            await respawn()

    def _give_up(self, failure: Failure) -> None:
        if self.failure is not None:
            return
        self.failure = failure
        log.error("%s: executor gave up after %d crash(es): %s", self.name, self._budget.recent, failure.detail)
        if self._on_giveup is not None:
            task: asyncio.Future[None] = asyncio.ensure_future(self._on_giveup(failure))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _liveness(self, watched: Callable[[], bool], stall: Callable[[float], Awaitable[None]]) -> None:
        while not self._stopped:
            await self._sleep(self._liveness_poll)
            silent = self._clock() - self._last_activity
            if watched() and self._tools_running == 0 and silent > self._liveness_timeout:
                log.warning("%s: silent for %.0fs mid-turn; killing it to resume", self.name, silent)
                await stall(silent)

"""Several workers on one PostgreSQL database: one serves, the others stand by until its lock is free."""

# With SQLite there is nothing to choose: the data dir's exclusive lock already keeps a second assistant out.
# With PostgreSQL, the worker that holds the database's serving lock runs the app (polls, turns, the scheduler,
# the outbox); the others try again every second. A worker that loses its lock's connection stops at once, without
# the clean shutdown (which sends and writes for seconds while another worker may already serve): what it leaves
# undone is what a kill -9 leaves, and the next worker's start replays it.

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from bicameral.store.leadership import ServingLock

log = logging.getLogger(__name__)
T = TypeVar("T")

STANDBY_RETRY_SECONDS = 1.0
CHECK_SECONDS = 1.0
CHECK_TIMEOUT_SECONDS = 5.0  # a check unanswered this long (a network gone silent) counts as the lock lost
# A worker that took the lock over waits this long before serving: a server whose session the database ended (while
# its process lives on) sees its next check fail and stops first, so the two never poll Telegram together (its 409
# would stop one of them).
HANDOVER_SECONDS = CHECK_SECONDS + 0.5
# Stopping the turns a standby ran, once it takes the lock over: what it still runs after this is fenced off.
HELPER_STOP_SECONDS = 10.0
STANDING_BY = "standing by: another worker serves this database"
LOST = "lost the database lock: another worker may serve now"


@contextlib.asynccontextmanager
async def turn_to_serve(
    database_url: str | None, stopping: asyncio.Event, on_lost: Callable[[], None] | None = None,
    meanwhile: Callable[[asyncio.Event], Awaitable[object]] | None = None,
) -> AsyncIterator[bool]:
    """True once this worker may serve (at once with SQLite: no URL), False when `stopping` is set while it stands by.

    While it stands by, `meanwhile(done)` runs (a worker that only runs turns) until `done` is set, when the lock is
    ours (it stops while this worker starts serving) or we stop. While it serves, the lock's connection is checked
    every second; when it is lost, `on_lost` runs (by default: the process ends with status 1). Leaving the block
    lets the lock go, once `meanwhile` has ended.
    """
    if database_url is None:
        yield True
        return
    lock = ServingLock(database_url)
    lock_call = _OwnThread()
    helping = _Meanwhile(meanwhile)
    try:
        if not await _wait_for_the_lock(lock, stopping, lock_call, helping):
            yield False
            return
        watcher = asyncio.create_task(_watch(lock, lock_call, on_lost or _stop_serving_now))
        try:
            yield True
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    finally:
        await helping.end()
        await lock_call(lock.close)
        lock_call.shutdown()


async def _wait_for_the_lock(lock: ServingLock, stopping: asyncio.Event, lock_call: _OwnThread, helping: _Meanwhile) -> bool:
    """Try for the lock every second until it is ours (True) or we are asked to stop (False).

    The first connection failing is a configuration error (exit 2); a later one, the database away for a while.
    """
    await lock_call(lock.connect)
    said = warned = False
    while not stopping.is_set():
        try:
            if await lock_call(lock.try_take):
                log.info("serving: this worker holds the database lock")
                helping.let_go()  # its turns stop while this worker starts serving; their chats are let go first
                if said:  # taken over from another worker, which may not know it yet
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), HANDOVER_SECONDS)
                return not stopping.is_set()
        except Exception as exc:  # the database went away while we stood by: try again, said once
            if not warned:
                log.warning("standing by: the database lock could not be asked for (%s)", type(exc).__name__)
                warned = True
            await lock_call(lock.close)
        if not said:
            log.warning(STANDING_BY)
            said = True
            helping.begin()
        helping.check()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), STANDBY_RETRY_SECONDS)
    return False


class _Meanwhile:
    """What a standing-by worker runs: started once, ended when the lock is ours or we stop; its failure is ours."""

    def __init__(self, run: Callable[[asyncio.Event], Awaitable[object]] | None) -> None:
        self._run = run
        self._done = asyncio.Event()
        self._task: asyncio.Task[object] | None = None

    def begin(self) -> None:
        if self._run is not None and self._task is None:
            self._task = asyncio.ensure_future(self._run(self._done))

    def check(self) -> None:
        """A helper that ended on its own (a fatal error) ends the wait with its error."""
        if self._task is not None and self._task.done() and not self._done.is_set():
            self._task.result()
            raise RuntimeError("the worker running turns stopped")

    def let_go(self) -> None:
        """Ask it to stop, without waiting."""
        self._done.set()

    async def end(self) -> None:
        """Stop it, waiting at most HELPER_STOP_SECONDS: its chats are let go first, so what it leaves is fenced off."""
        self._done.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(task, HELPER_STOP_SECONDS)
        except TimeoutError:
            log.warning("the turns this worker ran did not stop within %.0f s; serving anyway", HELPER_STOP_SECONDS)


async def _watch(lock: ServingLock, lock_call: _OwnThread, on_lost: Callable[[], None]) -> None:
    """Check the lock's connection every second; a failed or unanswered check is the lock lost."""
    while True:
        await asyncio.sleep(CHECK_SECONDS)
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):  # not wait_for: on 3.11 it may drop the stop's cancel
                alive = await lock_call(lock.alive)
        except TimeoutError:
            alive = False
        if not alive:
            on_lost()
            return


class _OwnThread:
    """The lock's blocking calls, in a thread of their own: a check must not queue behind the app's work."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="serving-lock")

    async def __call__(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)  # a check stuck on a dead network must not hold the exit


def _stop_serving_now() -> None:
    """Two workers must never serve together: say so and end the process now (status 1)."""
    log.critical(LOST)
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(1)

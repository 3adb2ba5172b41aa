"""One timer for the next due schedule, re-armed when a schedule changes; each fire recorded before delivery."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from bicameral.store.schedule_times import BadTime, next_cron
from bicameral.store.schedules import Fire, ScheduleStore
from bicameral.types import Clock, Sleep

log = logging.getLogger(__name__)

Deliver = Callable[[Fire], Awaitable[bool]]
"""Hands a recorded fire to the chat; True once it is safely delivered (then it is never sent again)."""


class Scheduler:
    def __init__(self, store: ScheduleStore, deliver: Deliver, *, clock: Clock = time.time, sleep: Sleep = asyncio.sleep) -> None:
        self._store = store
        self._deliver = deliver
        self._clock = clock
        self._sleep = sleep
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._deliveries: set[asyncio.Task[None]] = set()
        store.on_change(self._wake.set)

    async def start(self) -> None:
        """Deliver fires a crash left undelivered, then arm the timer (overdue schedules fire at once, once)."""
        pending = self._store.pending_fires()
        if pending:
            log.info("delivering %d fire(s) recorded before the last stop", len(pending))
        for fire in pending:
            self._spawn(fire)
        self._loop = asyncio.create_task(self._run(), name="scheduler")

    def _spawn(self, fire: Fire) -> None:
        """Deliver in the background: a slow chat must not hold up the clock or the start."""
        task = asyncio.create_task(self._hand_over(fire), name=f"fire:{fire.id}")
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def stop(self, grace: float = 1.0) -> None:
        """Stop the timer; deliveries under way get `grace` seconds to finish (the rest are re-sent on start)."""
        if self._loop is not None:
            self._loop.cancel()
        if self._deliveries:
            await asyncio.wait(set(self._deliveries), timeout=grace)
        tasks = [t for t in (self._loop, *self._deliveries) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                self._fire_due()
            except Exception:  # a broken row or a locked database must not end the clock
                log.exception("firing due schedules failed")
                await self._sleep(1.0)
                continue
            due = self._store.next_due_at()
            if due is None:
                await self._wake.wait()
            elif due > self._clock():
                await self._sleep_or_wake(due - self._clock())

    async def _sleep_or_wake(self, delay: float) -> None:
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    def _fire_due(self) -> None:
        while True:
            now = self._clock()
            due = self._store.due(now)
            if not due:
                return
            for schedule in due:
                next_due: float | None = None
                if schedule.cron is not None:
                    try:
                        # After now, not after the missed slot: a recurring schedule fires once, not per slot missed.
                        next_due = next_cron(schedule.cron, schedule.tz, now)
                    except BadTime:
                        log.warning("schedule %d has an unusable cron %r; finishing it", schedule.id, schedule.cron)
                fire = self._store.fire(schedule, now=now, next_due=next_due)
                if fire is not None:
                    self._spawn(fire)

    async def _hand_over(self, fire: Fire) -> None:
        try:
            delivered = await self._deliver(fire)
        except Exception:
            log.exception("fire %d of schedule %d not delivered; retried on the next start", fire.id, fire.schedule_id)
            return
        if delivered:
            self._store.delivered(fire.id, self._clock())
        else:
            log.warning("fire %d of schedule %d not delivered; retried on the next start", fire.id, fire.schedule_id)

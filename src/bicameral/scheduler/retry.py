"""A scheduled task's run tried again in process, with backoff, then an honest sentence if it never worked."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from bicameral.backoff import RetryPolicy
from bicameral.events import Inbound
from bicameral.failures import scheduled_task_failed
from bicameral.scheduler.delivery import fired_schedule
from bicameral.store.schedule_times import readable
from bicameral.types import Sleep

if TYPE_CHECKING:
    from bicameral.store.schedules import ScheduleStore

T = TypeVar("T")


@dataclass(frozen=True)
class FireRetry(RetryPolicy):
    """How often and how patiently a failed scheduled task is tried again before the user is told."""

    attempts: int = 3
    base_seconds: float = 30.0
    cap_seconds: float = 600.0

    async def run(
        self, attempt: Callable[[T | None], Awaitable[T]], failed: Callable[[T], bool], *, sleep: Sleep = asyncio.sleep
    ) -> tuple[T, int]:
        """Call `attempt` (given the last failed result, to build on) until it works or the tries run out."""
        result = await attempt(None)
        tries = 1
        while failed(result) and tries < self.attempts:
            await sleep(self.delay(tries))
            tries += 1
            result = await attempt(result)
        return result, tries


def scheduled_task(batch: Sequence[Inbound]) -> int | None:
    """The schedule a turn runs for, when its batch is nothing but a scheduled task's fire."""
    ids = {fired_schedule(inbound) for inbound in batch}
    return ids.pop() if len(ids) == 1 and None not in ids else None


def gave_up(schedule_id: int, reason: str, tries: int, store: ScheduleStore | None) -> str:
    """What the user hears when a scheduled task failed every try: what, why, and what happens next."""
    text = scheduled_task_failed(schedule_id, tries, reason)
    schedule = store.get(schedule_id) if store is not None else None
    if schedule is not None and schedule.recurring and schedule.state == "active" and schedule.next_due is not None:
        text += f" It runs again as planned, next on {readable(schedule.next_due, schedule.tz)}."
    return text

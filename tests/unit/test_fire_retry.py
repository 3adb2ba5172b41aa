"""FireRetry: a failed scheduled run is tried again with backoff, a bounded number of times."""

from __future__ import annotations

from bicameral.events import Inbound, InboundKind, Sender
from bicameral.scheduler.retry import FireRetry, scheduled_task


def _inbound(message_id: str, kind: InboundKind = "synthetic") -> Inbound:
    return Inbound(channel="telegram", chat="telegram:1", message_id=message_id, sender=Sender(id="1", name="x"),
                   text="t", ts=0.0, kind=kind)


async def test_it_stops_at_the_first_success_after_backing_off():
    waits: list[float] = []
    outcomes = iter(["fail", "fail", "ok", "never reached"])

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def attempt(previous: str | None) -> str:
        return next(outcomes)

    result, tries = await FireRetry(attempts=5, base_seconds=10, cap_seconds=600).run(attempt, lambda r: r == "fail", sleep=sleep)
    assert (result, tries) == ("ok", 3)
    assert waits == [10, 20]


async def test_it_gives_up_after_the_set_number_of_tries_with_capped_waits():
    waits: list[float] = []
    seen: list[str | None] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def attempt(previous: str | None) -> str:
        seen.append(previous)
        return f"fail {len(seen)}"

    result, tries = await FireRetry(attempts=4, base_seconds=30, cap_seconds=50).run(attempt, lambda r: True, sleep=sleep)
    assert (result, tries) == ("fail 4", 4)
    assert waits == [30, 50, 50]
    assert seen == [None, "fail 1", "fail 2", "fail 3"], "each retry builds on the failed result before it"


def test_only_a_batch_that_is_one_schedule_s_fire_counts_as_scheduled():
    fire = _inbound("schedule-7-fire-12")
    assert scheduled_task([fire]) == 7
    assert scheduled_task([fire, _inbound("55", kind="message")]) is None
    assert scheduled_task([_inbound("schedule-7-fire-12", kind="message")]) is None  # a person cannot spell one
    assert scheduled_task([fire, _inbound("schedule-8-fire-13")]) is None

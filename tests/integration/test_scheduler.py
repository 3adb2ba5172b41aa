"""The scheduler on real SQLite with a hand-moved clock: one timer, fires recorded before delivery, restarts."""

from __future__ import annotations

import asyncio

import pytest

from bicameral.scheduler import Scheduler
from bicameral.store import Stores
from bicameral.store.schedule_times import local_to_epoch, readable
from bicameral.store.schedules import Fire
from tests.support.chat import eventually, quiet_for
from tests.support.fake_time import FakeTime

START = local_to_epoch("2026-11-23 12:00", "UTC")
CHAT = "telegram:42"


class Inbox:
    """A delivery that keeps what it was handed; `hang=True` never finishes (a process dying mid-send)."""

    def __init__(self, hang: bool = False) -> None:
        self.fires: list[Fire] = []
        self.hang = hang
        self._arrived = asyncio.Condition()

    async def __call__(self, fire: Fire) -> bool:
        async with self._arrived:
            self.fires.append(fire)
            self._arrived.notify_all()
        if self.hang:
            await asyncio.Event().wait()
        return True

    async def until(self, count: int, timeout: float = 10.0) -> list[Fire]:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.fires) >= count)
        return self.fires


@pytest.fixture
def stores(tmp_path):
    opened = Stores.open(tmp_path / "bicameral.db")
    yield opened
    opened.close()


def _remind(stores: Stores, due: float, body: str = "call mum", cron: str | None = None, tz: str = "UTC"):
    return stores.schedules.create(
        chat=CHAT, creator="telegram:42", kind="text", body=body, tz=tz, next_due=due, now=START, cron=cron
    )


async def _running(stores: Stores, clock: FakeTime, inbox: Inbox) -> Scheduler:
    scheduler = Scheduler(stores.schedules, inbox, clock=clock, sleep=clock.sleep)
    await scheduler.start()
    return scheduler


async def test_a_reminder_fires_when_the_clock_reaches_it_not_before(stores):
    clock, inbox = FakeTime(START), Inbox()
    _remind(stores, START + 600)
    scheduler = await _running(stores, clock, inbox)
    try:
        await clock.until_sleeping()
        await clock.advance(599)
        await clock.until_sleeping()  # re-armed for the remaining second, nothing fired
        assert inbox.fires == []
        await clock.advance(1)
        [fire] = await inbox.until(1)
        assert (fire.body, fire.due_at, fire.late_by) == ("call mum", START + 600, 0)
        assert stores.schedules.live(CHAT) == []  # a one-shot is done once fired
    finally:
        await scheduler.stop()


async def test_a_new_schedule_wakes_the_timer_without_polling(stores):
    clock, inbox = FakeTime(START), Inbox()
    _remind(stores, START + 86400, body="tomorrow")
    scheduler = await _running(stores, clock, inbox)
    try:
        await clock.until_sleeping()
        _remind(stores, START + 60, body="in a minute")
        await clock.advance(60)
        [fire] = await inbox.until(1)
        assert fire.body == "in a minute"
    finally:
        await scheduler.stop()


async def test_paused_schedule_does_not_fire_and_resumed_one_does(stores):
    clock, inbox = FakeTime(START), Inbox()
    made = _remind(stores, START + 60)
    stores.schedules.update(made.id, state="paused")
    _remind(stores, START + 86400, body="tomorrow")
    scheduler = await _running(stores, clock, inbox)
    try:
        await clock.until_sleeping()
        await clock.advance(120)
        await quiet_for(0.1, "the paused schedule was due: its fire would have arrived by now")
        assert inbox.fires == []
        stores.schedules.update(made.id, state="active", next_due=START + 180)
        await clock.advance(60)
        [fire] = await inbox.until(1)
        assert fire.schedule_id == made.id
    finally:
        await scheduler.stop()


async def test_overdue_one_shot_fires_once_on_start_and_says_how_late(stores):
    _remind(stores, START - 2 * 3600)
    clock, inbox = FakeTime(START), Inbox()
    scheduler = await _running(stores, clock, inbox)
    try:
        [fire] = await inbox.until(1)
        assert fire.late_by == 2 * 3600
    finally:
        await scheduler.stop()


async def test_recurring_schedule_missed_for_days_fires_once_then_keeps_its_slot(stores):
    made = _remind(stores, START - 3 * 86400, body="stand-up", cron="0 9 * * *")
    clock, inbox = FakeTime(START), Inbox()
    scheduler = await _running(stores, clock, inbox)
    try:
        await inbox.until(1)
        await clock.until_sleeping()
        assert len(inbox.fires) == 1  # not once per missed morning
        [live] = stores.schedules.live(CHAT)
        assert live.id == made.id and readable(live.next_due, "UTC") == "Tue 24 Nov 2026, 09:00 UTC"
        await clock.advance(21 * 3600)
        fires = await inbox.until(2)
        assert fires[1].late_by == 0
    finally:
        await scheduler.stop()


async def test_a_crash_mid_fire_redelivers_it_once_on_start_and_never_again(stores):
    _remind(stores, START + 10)
    clock = FakeTime(START)
    dying = Inbox(hang=True)
    first = await _running(stores, clock, dying)
    await clock.advance(10)
    await dying.until(1)
    await first.stop()  # the process dies while the message is on its way

    assert [f.body for f in stores.schedules.pending_fires()] == ["call mum"]

    restarted = Inbox()
    second = await _running(stores, FakeTime(START + 30), restarted)
    try:
        [again] = await restarted.until(1)
        assert again.id == dying.fires[0].id and again.body == "call mum"
        # delivered: no later start sends it again (a row's state: the database has no change events to wait on)
        await eventually(lambda: stores.schedules.pending_fires() == [], "the fire's row to say delivered")
        await quiet_for(0.2, "its time is past at the restart: had the schedule fired again, that fire would be here by now")
        assert len(restarted.fires) == 1  # and the schedule itself did not fire a second time
    finally:
        await second.stop()


async def test_a_failed_delivery_stays_for_the_next_start(stores):
    _remind(stores, START - 5)
    tried = asyncio.Event()

    async def refused(fire: Fire) -> bool:
        tried.set()
        return False

    clock = FakeTime(START)
    scheduler = Scheduler(stores.schedules, refused, clock=clock, sleep=clock.sleep)
    await scheduler.start()
    await asyncio.wait_for(tried.wait(), 10)
    await scheduler.stop()
    assert [f.body for f in stores.schedules.pending_fires()] == ["call mum"]


async def test_a_thousand_due_in_the_same_second_all_fire_once(stores):
    for i in range(1000):
        stores.schedules.create(
            chat=f"telegram:{i % 200}", creator=f"telegram:{i % 200}", kind="text", body=f"r{i}", tz="UTC",
            next_due=START + 5, now=START,
        )
    clock, inbox = FakeTime(START), Inbox()
    scheduler = await _running(stores, clock, inbox)
    try:
        await clock.until_sleeping()
        await clock.advance(5)
        fires = await inbox.until(1000)
        assert sorted(f.body for f in fires) == sorted(f"r{i}" for i in range(1000))
    finally:
        await scheduler.stop()

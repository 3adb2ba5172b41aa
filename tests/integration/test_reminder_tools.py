"""The schedule tools on real SQLite: resolved local times, isolation between chats, and every bad input."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bicameral.events import ActionResult, Authority, Role
from bicameral.store import Stores
from bicameral.store.memory_scopes import reach_for
from bicameral.store.schedules import SchedulePolicy
from bicameral.tools.base import ToolContext
from bicameral.tools.reminders import (
    CancelSchedule,
    CreateArgs,
    CreateSchedule,
    EditArgs,
    EditSchedule,
    IdArgs,
    ListArgs,
    ListSchedules,
    PauseSchedule,
    ResumeSchedule,
)

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)  # a Monday; 13:00 in Berlin


async def _ok(action) -> ActionResult:
    return ActionResult(ok=True)


@pytest.fixture
def stores(tmp_path):
    opened = Stores.open(tmp_path / "bicameral.db")
    opened.schedules.policy = SchedulePolicy(default_tz="UTC", per_user=50, min_interval_seconds=300)
    yield opened
    opened.close()


def _ctx(stores: Stores, user: int = 42, *, owner: bool = False, chat: str | None = None) -> ToolContext:
    chat = chat or f"telegram:{user}"
    reach = reach_for(chat, channel="telegram", sender_id=str(user), private=True, own_lane=True, owner=owner)
    return ToolContext(chat=chat, turn_id="t1", data_dir=stores.db.path.parent, perform=_ok, stores=stores,
                       now=lambda: NOW, authority=Authority.of(Role.OWNER if owner else Role.MEMBER, (f"telegram:{user}",)),
                       reach=reach)


async def _create(stores: Stores, ctx: ToolContext, **args):
    return await CreateSchedule().run(CreateArgs(text=args.pop("text", "call mum"), **args), ctx)


@pytest.fixture
def berliner(stores):
    stores.schedules.set_timezone("telegram:42", "Europe/Berlin")
    return _ctx(stores)


async def test_an_exact_local_time_is_confirmed_in_the_users_zone(stores, berliner):
    result = await _create(stores, berliner, at="2026-11-24 09:00")
    assert not result.is_error
    assert result.content == "Reminder #1 set for Tue 24 Nov 2026, 09:00 Europe/Berlin."


async def test_in_n_minutes_reads_back_as_local_time(stores, berliner):
    result = await _create(stores, berliner, in_minutes=20)
    assert result.content == "Reminder #1 set for Mon 23 Nov 2026, 13:20 Europe/Berlin."


async def test_a_weekday_cron_confirms_the_first_time_and_the_rule(stores, berliner):
    result = await _create(stores, berliner, cron="30 8 * * 1-5", kind="task", text="summarise the news")
    assert result.content == "Scheduled task #1 set for Tue 24 Nov 2026, 08:30 Europe/Berlin, then repeating `30 8 * * 1-5`."


async def test_a_time_zone_given_for_one_schedule_wins(stores, berliner):
    result = await _create(stores, berliner, at="2026-11-24 09:00", timezone="Asia/Tokyo")
    assert result.content.endswith("Tue 24 Nov 2026, 09:00 Asia/Tokyo.")


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        ({"at": "2026-11-23 09:00"}, "is already past (it is now Mon 23 Nov 2026, 13:00 Europe/Berlin)"),
        ({"cron": "every monday"}, "five fields"),
        ({"cron": "* * * * * *"}, "would repeat every 1 s; schedules may repeat at most every 5 min"),
        ({"cron": "* * * * *"}, "would repeat every 60 s"),
        ({}, "give exactly one of"),
        ({"at": "2026-11-24 09:00", "in_minutes": 5}, "give exactly one of"),
        ({"at": "next tuesday"}, "YYYY-MM-DD HH:MM"),
        ({"in_minutes": 5, "timezone": "Berlin"}, "unknown time zone 'Berlin'"),
    ],
)
async def test_bad_times_get_a_clear_answer_and_store_nothing(stores, berliner, args, answer):
    result = await _create(stores, berliner, **args)
    assert result.is_error and answer in result.content
    assert stores.schedules.live() == []


async def test_another_chats_schedule_can_be_neither_seen_nor_changed(stores, berliner):
    await _create(stores, berliner, in_minutes=30)
    stranger = _ctx(stores, user=7)
    assert (await ListSchedules().run(ListArgs(), stranger)).content == "No reminders or scheduled tasks."
    for tool in (CancelSchedule(), PauseSchedule(), ResumeSchedule()):
        result = await tool.run(IdArgs(id=1), stranger)
        assert result.is_error and "there is no schedule #1 in this chat" in result.content
    edited = await EditSchedule().run(EditArgs(id=1, text="hacked"), stranger)
    assert edited.is_error
    [mine] = stores.schedules.live("telegram:42")
    assert (mine.body, mine.state) == ("call mum", "active")


async def test_the_owner_sees_and_changes_every_chats_schedules(stores, berliner):
    await _create(stores, berliner, in_minutes=30)
    owner = _ctx(stores, user=1, owner=True)
    listed = await ListSchedules().run(ListArgs(all_chats=True), owner)
    assert "#1 ⏰ call mum" in listed.content and "(in telegram:42)" in listed.content
    assert (await CancelSchedule().run(IdArgs(id=1), owner)).content == "Cancelled #1."
    assert stores.schedules.live() == []


async def test_pause_resume_edit_and_cancel_in_ones_own_chat(stores, berliner):
    await _create(stores, berliner, cron="0 9 * * *")
    assert (await PauseSchedule().run(IdArgs(id=1), berliner)).content == "Paused #1."
    assert "[paused]" in (await ListSchedules().run(ListArgs(), berliner)).content
    resumed = await ResumeSchedule().run(IdArgs(id=1), berliner)
    assert resumed.content == "Resumed #1: next Tue 24 Nov 2026, 09:00 Europe/Berlin."
    edited = await EditSchedule().run(EditArgs(id=1, text="water the plants", at="2026-11-25 18:00"), berliner)
    assert edited.content == "Changed: #1 ⏰ water the plants — next Wed 25 Nov 2026, 18:00 Europe/Berlin"
    assert (await CancelSchedule().run(IdArgs(id=1), berliner)).content == "Cancelled #1."
    again = await CancelSchedule().run(IdArgs(id=1), berliner)
    assert again.is_error


async def test_ten_thousand_requests_from_one_user_stop_at_the_limit(stores, berliner):
    stores.schedules.policy = replace(stores.schedules.policy, per_user=25)
    answers = [await _create(stores, berliner, in_minutes=10 + i % 500) for i in range(10_000)]
    assert sum(not a.is_error for a in answers) == 25
    assert answers[-1].content == "you already have 25 schedules, the most allowed; cancel some first"
    assert len(stores.schedules.live(limit=100_000)) == 25
    # Others are not held back by one user's flood.
    assert not (await _create(stores, _ctx(stores, user=7), in_minutes=5)).is_error


async def test_a_protected_schedule_refuses_cancel_pause_and_edit(stores):
    owner = _ctx(stores, user=1, owner=True)
    stores.schedules.create(chat=owner.chat, creator="telegram:1", kind="task", body="reflect", tz="UTC",
                            next_due=NOW.timestamp() + 3600, now=NOW.timestamp(), cron="0 0 * * *", protected="reflection")
    for tool in (CancelSchedule(), PauseSchedule()):
        result = await tool.run(IdArgs(id=1), owner)
        assert result.is_error and "protected" in result.content
    assert (await EditSchedule().run(EditArgs(id=1, text="nothing"), owner)).is_error
    assert stores.schedules.live()[0].state == "active"

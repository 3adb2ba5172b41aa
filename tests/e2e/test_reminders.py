"""Reminders end to end through the fake Telegram: set by the model, fired on the real clock, across restarts."""

from __future__ import annotations

import json
import time

from bicameral.store import Stores
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import eventually, quiet_for, until_sent

FRIEND = 2002


def _open_access(settings) -> None:
    path = settings.resolved_access_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"policy": "open"}))


def _result_of(req) -> str:
    """The task result inside the front's voice-pass request."""
    return req.last_user_text().split("<result>")[-1].split("</result>")[0].strip()


def _stored(settings, *schedules: dict) -> list[int]:
    """Schedules written into the database before the assistant starts (as a previous run left them)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = Stores.open(settings.database_location, data_dir=settings.data_dir)
    try:
        ids = []
        for values in schedules:
            chat = values.pop("chat", f"telegram:{OWNER}")
            made = stores.schedules.create(
                chat=chat, creator=values.pop("creator", chat), tz="UTC", now=time.time(), **values
            )
            ids.append(made.id)
        return ids
    finally:
        stores.close()


async def test_a_reminder_a_few_seconds_out_arrives_on_the_real_clock(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("schedule_create", {"text": "call mum", "in_minutes": 0.05})]),
        Reply(text="I'll remind you in a few seconds."),
    )
    await start_bot()
    telegram.user_sends(OWNER, "remind me in 3 seconds to call mum")
    await until_sent(telegram, OWNER, "I'll remind you in a few seconds.")
    confirmation = models.requests[1].tool_results()[0]["content"]
    assert confirmation.startswith("Reminder #1 set for ") and confirmation.endswith(" UTC.")
    await until_sent(telegram, OWNER, "⏰ Reminder: call mum", timeout=30)
    assert len(models.requests) == 2  # the reminder itself needs no model call


async def test_overdue_schedules_fire_once_on_start_with_an_honest_delay(telegram, models, start_bot, make_settings):
    now = time.time()
    _stored(
        make_settings(),
        {"kind": "text", "body": "call mum", "next_due": now - 2 * 3600 - 30},
        {"kind": "text", "body": "stand-up", "next_due": now - 3 * 86400, "cron": "0 9 * * *"},
        {"kind": "text", "body": "later", "next_due": now + 3600},
    )
    await start_bot()
    await until_sent(telegram, OWNER, "⏰ Reminder: call mum (late by 2 h: I was offline when it was due)")
    await until_sent(telegram, OWNER, "⏰ Reminder: stand-up (late by 3 days: I was offline when it was due)")
    await quiet_for(0.5, "a second fire for the missed mornings, or the later reminder early, would have arrived by now")
    texts = [m["text"] for m in telegram.sent_messages(OWNER)]
    assert len(texts) == 2 and not any("later" in t for t in texts)  # the missed mornings fire once, not three times


async def test_a_restart_does_not_send_a_delivered_reminder_again(telegram, models, start_bot, make_settings):
    _stored(make_settings(), {"kind": "text", "body": "once only", "next_due": time.time() - 1})
    app = await start_bot()
    await until_sent(telegram, OWNER, "⏰ Reminder: once only")
    stores = Stores.open(make_settings().database_location, data_dir=make_settings().data_dir)
    try:
        await eventually(lambda: not stores.schedules.pending_fires(), "the fire's row to say delivered", timeout=15)
        assert stores.schedules.pending_fires() == []
    finally:
        stores.close()
    await app.stop()
    telegram.user_sends(OWNER, "/reminders")
    await start_bot()
    await until_sent(telegram, OWNER, "No reminders or scheduled tasks in this chat. Ask me to remind you of something.")
    assert [m["text"] for m in telegram.sent_messages(OWNER)].count("⏰ Reminder: once only") == 1


async def test_a_scheduled_task_runs_as_a_turn_in_single_mode(telegram, models, start_bot, make_settings):
    models.script(Reply(text="Here is today's news summary."))
    _stored(make_settings(), {"kind": "task", "body": "summarise the news on X", "next_due": time.time() - 1,
                              "creator": f"telegram:{OWNER}"})
    await start_bot()
    await until_sent(telegram, OWNER, "Here is today's news summary.")
    seen = json.dumps(models.requests[0].raw, ensure_ascii=False)
    assert "summarise the news on X" in seen and "scheduled_task" in seen


async def test_reminders_command_lists_and_controls_only_this_chats_schedules(telegram, models, start_bot, make_settings):
    settings = make_settings()
    _open_access(settings)
    later = time.time() + 86400
    mine, theirs = _stored(
        settings,
        {"chat": f"telegram:{FRIEND}", "kind": "text", "body": "friend's dentist", "next_due": later},
        {"kind": "text", "body": "owner's taxes", "next_due": later},
    )
    await start_bot()
    telegram.user_sends(FRIEND, "/reminders")
    listing = (await telegram.await_sent(FRIEND, 1))[0]["text"]
    assert f"#{mine} ⏰ friend's dentist" in listing and "taxes" not in listing

    telegram.user_sends(FRIEND, f"/reminders cancel {theirs}")
    refused = (await telegram.await_sent(FRIEND, 2))[1]["text"]
    assert refused.startswith(f"There is no reminder #{theirs} in this chat.")

    telegram.user_sends(FRIEND, f"/reminders pause {mine}")
    assert (await telegram.await_sent(FRIEND, 3))[2]["text"] == f"Paused #{mine}."
    telegram.user_sends(FRIEND, f"/reminders cancel {mine}")
    assert (await telegram.await_sent(FRIEND, 4))[3]["text"] == f"Cancelled #{mine}."

    telegram.user_sends(OWNER, "/reminders")
    owner_view = (await telegram.await_sent(OWNER, 1))[0]["text"]
    assert f"#{theirs} ⏰ owner's taxes" in owner_view  # the friend's attempt changed nothing


async def test_timezone_command_sets_the_zone_new_reminders_use(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("schedule_create", {"text": "tea", "at": "2099-01-05 17:00"})]),
        Reply(text="Set."),
    )
    await start_bot()
    telegram.user_sends(OWNER, "/timezone Mars/Base")
    assert "unknown time zone 'Mars/Base'" in (await telegram.await_sent(OWNER, 1))[0]["text"]
    telegram.user_sends(OWNER, "/timezone Asia/Tokyo")
    assert (await telegram.await_sent(OWNER, 2))[1]["text"].startswith("Your time zone is now Asia/Tokyo.")
    telegram.user_sends(OWNER, "remind me to have tea on 5 January 2099 at 5 pm")
    await until_sent(telegram, OWNER, "Set.")
    assert models.requests[1].tool_results()[0]["content"] == "Reminder #1 set for Mon 5 Jan 2099, 17:00 Asia/Tokyo."


async def test_in_two_chambers_a_reminder_needs_no_model_and_a_task_runs_on_the_back(telegram, models, start_bot, make_settings):
    models.script(Reply(tool_calls=[ToolCall("spawn", {"spec": "Summarise the news on X.", "label": "news"})]), model="front")
    models.responder(lambda req: Reply(text="Here you go: " + _result_of(req)), model="front")
    models.script(Reply(text="News on X: a calm day."), model="back")
    now = time.time()
    _stored(
        make_settings(),
        {"kind": "text", "body": "stretch", "next_due": now - 1},
        {"kind": "task", "body": "summarise the news on X", "next_due": now - 1, "creator": f"telegram:{OWNER}"},
    )
    await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=150)
    await until_sent(telegram, OWNER, "⏰ Reminder: stretch")
    await eventually(lambda: any("calm day" in m["text"] for m in telegram.sent_messages(OWNER)), "the task's result", timeout=20)
    assert any("calm day" in m["text"] for m in telegram.sent_messages(OWNER))
    triage = json.dumps(models.requests_for("front")[0].raw, ensure_ascii=False)
    assert "scheduled_task" in triage and "summarise the news on X" in triage
    assert "Summarise the news on X." in json.dumps(models.requests_for("back")[0].raw, ensure_ascii=False)

"""A scheduled task whose run fails is tried again in process, with backoff, then the user is told honestly."""

from __future__ import annotations

import json
import time

from bicameral.store import Stores
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import until_sent

CHAT = f"telegram:{OWNER}"
# Retries a few milliseconds apart: the backoff itself is covered with an injected sleep in tests/unit/test_fire_retry.py.
QUICK = dict(model_max_retries=0, schedule_retry_base_seconds=0.01, schedule_retry_cap_seconds=0.05)
FAST = dict(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)


def _stored_task(settings, body: str, *, cron: str | None = None) -> int:
    """A scheduled task already due, as a previous run left it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = Stores.open(settings.database_location, data_dir=settings.data_dir)
    try:
        now = time.time()
        return stores.schedules.create(
            chat=CHAT, creator=CHAT, kind="task", body=body, tz="UTC", now=now, next_due=now - 1, cron=cron
        ).id
    finally:
        stores.close()


def _texts(telegram) -> list[str]:
    return [m["text"] for m in telegram.sent_messages(OWNER)]


async def test_a_scheduled_task_that_fails_once_is_retried_and_its_answer_arrives(telegram, models, start_bot, make_settings):
    models.script(Reply(error_status=500, error_message="kaboom"), Reply(text="Here is today's news summary."))
    _stored_task(make_settings(**QUICK), "summarise the news on X")
    await start_bot(**QUICK)
    await until_sent(telegram, OWNER, "Here is today's news summary.")
    assert _texts(telegram) == ["Here is today's news summary."], "no failure was reported for a run that recovered"
    assert len(models.requests) == 2
    assert "summarise the news on X" in json.dumps(models.requests[1].raw, ensure_ascii=False)


async def test_a_scheduled_task_that_always_fails_is_reported_once_and_keeps_its_next_slot(
    telegram, models, start_bot, make_settings
):
    models.responder(lambda req: Reply(error_status=500, error_message="kaboom"))
    settings = make_settings(**QUICK, schedule_task_attempts=3)
    schedule_id = _stored_task(settings, "check the deploy", cron="0 9 * * 1")
    app = await start_bot(**QUICK, schedule_task_attempts=3)
    sent = await telegram.await_sent(OWNER, 1)
    text = sent[0]["text"]
    assert text.startswith(f"Your scheduled task #{schedule_id} didn't run (I tried 3 times). ")
    assert "It runs again as planned, next on Mon " in text and "kaboom" not in text and "500" not in text
    assert len(models.requests) == 3
    schedule = app.stores.schedules.get(schedule_id)
    assert schedule is not None and schedule.state == "active" and schedule.next_due > time.time()


async def test_in_two_chambers_a_front_failure_on_a_scheduled_task_is_retried(telegram, models, start_bot, make_settings):
    models.script(
        Reply(error_status=529, error_message="Overloaded"),
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Summarise the news on X.", "label": "news"})]),
        model="front",
    )
    models.responder(lambda req: Reply(text="Here you go: News on X: a calm day."), model="front")
    models.script(Reply(text="News on X: a calm day."), model="back")
    _stored_task(make_settings(**FAST, **QUICK), "summarise the news on X")
    await start_bot(**FAST, **QUICK)
    await until_sent(telegram, OWNER, "Here you go: News on X: a calm day.")
    assert not any("overloaded" in t.lower() for t in _texts(telegram))
    assert "Summarise the news on X." in json.dumps(models.requests_for("back")[0].raw, ensure_ascii=False)


def _front_spawns(models) -> None:
    """The front hands the scheduled task to the back and voices whatever comes back."""

    def front(req: Request) -> Reply:
        said = req.last_user_text()
        if "scheduled_task" in said:
            return Reply(tool_calls=[ToolCall("spawn", {"spec": "Summarise the news on X.", "label": "news"})])
        return Reply(text="Here you go: " + said.split("<result>")[-1].split("</result>")[0].strip())

    models.responder(front, model="front")


async def test_in_two_chambers_a_back_failure_on_a_scheduled_task_is_retried_quietly(
    telegram, models, start_bot, make_settings
):
    _front_spawns(models)
    models.script(Reply(error_status=500, error_message="kaboom"), Reply(text="News on X: a calm day."), model="back")
    settings = {**FAST, **QUICK, "task_retry_delay_seconds": 30}  # the bus's own delay would outlast the test
    _stored_task(make_settings(**settings), "summarise the news on X")
    app = await start_bot(**settings)
    await until_sent(telegram, OWNER, "Here you go: News on X: a calm day.")
    assert not any("snag" in t.lower() or "kaboom" in t for t in _texts(telegram)), "nobody waits on a scheduled task"
    [task] = app.tasks.for_chat(CHAT)
    assert task.state.value == "completed" and task.attempts == 2


async def test_in_two_chambers_a_scheduled_task_the_back_always_fails_is_tried_as_the_schedule_says(
    telegram, models, start_bot, make_settings
):
    _front_spawns(models)
    models.responder(lambda req: Reply(error_status=500, error_message="kaboom"), model="back")
    settings = dict(**FAST, **QUICK, schedule_task_attempts=4, task_max_attempts=2)
    schedule_id = _stored_task(make_settings(**settings), "summarise the news on X", cron="0 9 * * 1")
    app = await start_bot(**settings)
    sent = await telegram.await_sent(OWNER, 1)
    text = sent[0]["text"]
    assert text.startswith(f"Your scheduled task #{schedule_id} didn't run (I tried 4 times). ")
    assert "It runs again as planned, next on Mon " in text and "kaboom" not in text
    assert len(models.requests_for("back")) == 4 and app.tasks.for_chat(CHAT)[0].state.value == "failed"

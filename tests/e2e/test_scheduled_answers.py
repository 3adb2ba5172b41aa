"""A scheduled task's answer reaches its chat exactly once, in DMs and groups, in both modes.

A fire enters as a synthetic message (`schedule-<id>-fire-<n>`): it is no Telegram message, so the answer
must not reply to it (Telegram refuses such a reply target, and the answer would be lost).
"""

from __future__ import annotations

import json
import time

import pytest

from bicameral.store import Stores
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually

GROUP = -100440
ANN = 2001
FAST = dict(delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)


def _stored_task(settings, chat: int, creator: int, body: str) -> int:
    """A scheduled task already due, as an earlier run left it; a group's was set in its creator's lane."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = Stores.open(settings.database_location, data_dir=settings.data_dir)
    try:
        now = time.time()
        return stores.schedules.create(
            chat=f"telegram:{chat}", creator=f"telegram:{creator}", kind="task", body=body, tz="UTC",
            now=now, next_due=now - 1, private=chat > 0,
        ).id
    finally:
        stores.close()


def _front(req: Request) -> Reply:
    """The front hands the fire to the back and voices the result that comes back."""
    said = req.last_user_text()
    if "scheduled_task" in said:
        return Reply(tool_calls=[ToolCall("spawn", {"spec": "Summarise the news on X.", "label": "news"})])
    return Reply(text="Here you go: " + said.split("<result>")[-1].split("</result>")[0].strip())


async def _settled(app) -> None:
    """Everything the fire caused is done: the fire delivered, every task delivered, the outbox empty."""

    def done() -> bool:
        tasks = app.tasks.for_chat(f"telegram:{GROUP}") + app.tasks.for_chat(f"telegram:{OWNER}")
        return (
            not app.stores.schedules.pending_fires()
            and all(t.delivered_at is not None for t in tasks)
            and not app.stores.outbox.pending()
        )

    await eventually(done, timeout=20)


@pytest.mark.parametrize("chat", [GROUP, OWNER], ids=["group", "dm"])
@pytest.mark.parametrize("mode", ["bicameral", "single"])
async def test_a_scheduled_tasks_answer_arrives_once_and_replies_to_nothing(
    telegram, models, start_bot, make_settings, mode, chat
):
    creator = ANN if chat < 0 else OWNER
    if mode == "bicameral":
        models.responder(_front, model="front")
        models.script(Reply(text="News on X: a calm day."), model="back")
        answer = "Here you go: News on X: a calm day."
    else:
        models.script(Reply(text="News on X: a calm day."))
        answer = "News on X: a calm day."
    _stored_task(make_settings(mode=mode, **FAST), chat, creator, "summarise the news on X")
    app = await start_bot(mode=mode, **FAST)
    [sent] = await telegram.await_sent(chat, 1)
    assert sent["text"] == answer
    assert sent["params"].get("reply_parameters") is None, "a fire is no message to reply to"
    await _settled(app)
    assert [m["text"] for m in telegram.sent_messages(chat)] == [answer], "the answer arrives exactly once"
    sends = telegram.calls_to("sendMessage")
    assert [c.status for c in sends] == [200], "sent at the first attempt, nothing refused"


async def test_a_group_scheduled_task_still_reaches_its_creators_memory(telegram, models, start_bot, make_settings):
    """The fire has no reply anchor, but its task still works for the person who set the schedule."""
    settings = make_settings(mode="bicameral", **FAST)
    _stored_task(settings, GROUP, ANN, "summarise the news on X")
    stores = Stores.open(settings.database_location, data_dir=settings.data_dir)
    try:
        stores.memory.remember(f"user:telegram:{ANN}", "Ann reads the news on X for the markets", importance=0.9)
        stores.memory.remember(f"user:telegram:{OWNER}", "The owner reads the news on X for the weather", importance=0.9)
    finally:
        stores.close()
    models.responder(_front, model="front")
    models.script(Reply(text="News on X: a calm day."), model="back")
    app = await start_bot(mode="bicameral", **FAST)
    await telegram.await_sent(GROUP, 1)
    await _settled(app)
    seen = json.dumps(models.requests_for("back")[0].raw, ensure_ascii=False)
    assert "for the markets" in seen, "the creator's own facts reach the task"
    assert "for the weather" not in seen, "nobody else's do"

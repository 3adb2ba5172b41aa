"""The front's follow-ups survive a restart: the quiet-burst question and a result held while the user is away."""

from __future__ import annotations

import time

from bicameral.events import Inbound, Sender
from bicameral.store import Stores
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually, until_sent

FAST = dict(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)
CHAT = f"telegram:{OWNER}"
QUESTION = "Still on the first thing, or moving on?"


def _texts(telegram) -> list[str]:
    return [m["text"] for m in telegram.sent_messages(OWNER)]


def _voice_echo(req: Request) -> Reply:
    return Reply(text="Here you go: " + req.last_user_text().split("<result>")[-1].split("</result>")[0].strip())


async def test_the_quiet_burst_question_is_still_asked_after_a_restart(telegram, models, start_bot):
    models.script(Reply(tool_calls=[ToolCall("wait_for_more", {"question": QUESTION})]), model="front")
    app = await start_bot(**FAST, burst_followup_seconds=3)
    telegram.user_sends(OWNER, "ok so first thing:")
    await eventually(lambda: app.stores.schedules.followup(CHAT) is not None)
    await app.stop()
    assert _texts(telegram) == []
    app = await start_bot(**FAST, burst_followup_seconds=3)
    sent = await telegram.await_sent(OWNER, 1, timeout=15)
    assert sent[0]["text"] == QUESTION
    assert app.stores.schedules.followup(CHAT) is None
    assert app.stores.schedules.live(CHAT) == [], "a follow-up is not one of the user's schedules"


async def test_the_question_is_dropped_when_the_user_spoke_across_the_restart(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("wait_for_more", {"question": QUESTION})]),
        Reply(text="got both things"),
        model="front",
    )
    app = await start_bot(**FAST, burst_followup_seconds=4)
    telegram.user_sends(OWNER, "ok so first thing:")
    await eventually(lambda: app.stores.schedules.followup(CHAT) is not None)
    await app.stop()
    telegram.user_sends(OWNER, "second thing: the invoices")  # while the assistant is down
    app = await start_bot(**FAST, burst_followup_seconds=4)
    await until_sent(telegram, OWNER, "got both things")
    triage = models.requests_for("front")[1].last_user_text()
    assert "<pending_followup>" in triage, "the front knows it was waiting for the rest"
    # Finished, not postponed: the scheduler can no longer ask it.
    assert app.stores.schedules.followup(CHAT) is None and app.stores.schedules.pending_fires() == []
    assert QUESTION not in _texts(telegram)


async def test_an_overdue_question_is_not_asked_if_the_user_spoke_after_it_was_set(telegram, models, start_bot, make_settings):
    settings = make_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    stores = Stores.open(settings.database_location, data_dir=settings.data_dir)
    try:
        stores.schedules.set_followup(CHAT, QUESTION, due=now - 5, now=now - 30)
        stores.schedules.set_followup("telegram:2002", "And the second?", due=now - 5, now=now - 30)
        spoke = Inbound(channel="telegram", chat=CHAT, message_id="77", sender=Sender(id=str(OWNER), name="Ann"),
                        text="never mind", ts=now - 10, update_id=77)
        stores.messages.record_inbound(spoke, status="consumed")
    finally:
        stores.close()
    app = await start_bot(**FAST)
    await eventually(lambda: not app.stores.schedules.pending_fires() and app.stores.schedules.followup(CHAT) is None)
    assert _texts(telegram) == []
    # The other chat's user said nothing since: theirs is asked, on start, once.
    assert [m["text"] for m in await telegram.await_sent(2002, 1)] == ["And the second?"]


async def test_a_result_held_while_away_is_reintroduced_once_after_a_restart(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Book-keeping export.", "label": "the export"}),
                          ToolCall("reply", {"text": "on it"})]),
        model="front",
    )
    models.script(Reply(text="Export ready: 42 rows.", latency=1.5), model="back")  # done after they went away
    app = await start_bot(**FAST, away_after_seconds=0.5)
    telegram.user_sends(OWNER, "export the books")
    await telegram.await_sent(OWNER, 1)
    await eventually(lambda: app.tasks.for_chat(CHAT)[0].state.value == "completed")
    assert _texts(telegram) == ["on it"], "held while the user is away"
    await app.stop()

    models.script(Reply(text="oh hey!"), model="front")
    models.responder(lambda req: Reply(text="The export is ready: 42 rows."), model="front")
    app = await start_bot(**FAST, away_after_seconds=0.5)
    telegram.user_sends(OWNER, "hi again")
    await telegram.await_sent(OWNER, 3)
    texts = _texts(telegram)
    assert texts[1] == "oh hey!"
    assert "finished the export" in texts[2] and "42 rows" in texts[2]
    await app.stop()

    models.script(Reply(text="anything else?"), model="front")
    app = await start_bot(**FAST, away_after_seconds=0.5)
    telegram.user_sends(OWNER, "thanks")
    await until_sent(telegram, OWNER, "anything else?")
    assert sum("42 rows" in t for t in _texts(telegram)) == 1, "delivered once, across restarts"


async def test_a_result_being_worded_when_the_user_writes_is_delivered_once(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("spawn", {"spec": "Count the rows.", "label": "rows"}),
                          ToolCall("reply", {"text": "on it"})]),
        Reply(text="There are 42 rows.", latency=2.0),  # the voice pass of the result, still running when they write
        Reply(text="hey, one sec"),
        model="front",
    )
    models.responder(_voice_echo, model="front")
    models.script(Reply(text="42 rows."), model="back")
    await start_bot(**FAST)
    telegram.user_sends(OWNER, "count the rows")
    await telegram.await_sent(OWNER, 1)
    await models.await_requests(2, model="front")
    telegram.user_sends(OWNER, "so?")
    await until_sent(telegram, OWNER, "There are 42 rows.")
    models.script(Reply(text="(follow-up answered)"), model="front")
    telegram.user_sends(OWNER, "one more thing")
    await until_sent(telegram, OWNER, "(follow-up answered)")
    assert sum("42 rows" in t for t in _texts(telegram)) == 1, _texts(telegram)

"""Spending caps end to end, through the fake Bot API and the scripted model server: a friend over
BICAMERAL_USER_DAILY_TOKENS is told in one sentence and no model call is made; the owner gets one message per person
and day with buttons; allowing more answers what was held, keeping the cap does not; held work and an allowance
outlive a restart; the owner is exempt from the per-person cap but not from BICAMERAL_DAILY_TOKENS; a two-chamber task
is stopped before its step's call; anyone else's press, forged data, another chat's message, a second press and a
press on an earlier day change nothing; the next UTC day the cap resets."""

from __future__ import annotations

from bicameral.console.caps import ANSWERED, EXPIRED, NOT_YOURS, UNKNOWN
from bicameral.failures import failure_sentence
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.chat import eventually, quiet_for
from tests.support.console import FRIEND, allowing, texts

CAP = 1000
SORRY = failure_sentence("cap")
DAY = 86400.0


def _answers(request: Request) -> Reply:
    """Answers with the words it was given; every call costs 1,200 tokens, over the cap at once."""
    words = request.last_user_text().split("</msg>")
    last = words[-2].rsplit(">", 1)[-1] if len(words) > 1 else words[0]
    return Reply(text="answer: " + last.strip(), usage=(800, 400))


async def _notice(telegram) -> dict:
    """The owner's message about a cap, once it shows its buttons."""
    [sent] = await telegram.await_sent(OWNER, 1)
    assert [label for label, _ in telegram.inline_buttons(OWNER, sent["message_id"])] == [
        f"Allow {CAP:,} more today", "Allow until tomorrow", "Keep the cap",
    ]
    return sent


def _button(telegram, notice: dict, label: str) -> str:
    return next(data for text, data in telegram.inline_buttons(OWNER, notice["message_id"]) if text.startswith(label))


async def _answered(telegram, query_id: str) -> str:
    answers = await eventually(lambda: telegram.press_answers().get(query_id), f"an answer to press {query_id}")
    return answers.get("text") or ""


async def _over_the_cap(telegram, models, start_bot, **overrides):
    """The friend spends past the cap with one answered message, then a second one is held."""
    models.responder(_answers)
    app = await allowing(start_bot, user_daily_tokens=CAP, **overrides)
    telegram.user_sends(FRIEND, "first question")
    await telegram.await_sent(FRIEND, 1)
    telegram.user_sends(FRIEND, "second question")
    [_, sorry] = await telegram.await_sent(FRIEND, 2)
    assert sorry["text"] == SORRY
    return app


async def test_a_friend_over_the_cap_is_told_once_and_no_call_is_made(telegram, models, start_bot):
    app = await _over_the_cap(telegram, models, start_bot)
    notice = await _notice(telegram)
    assert f"{FRIEND}" in notice["text"] and "1,200 of their 1,000 tokens" in notice["text"]
    telegram.user_sends(FRIEND, "third question")
    await telegram.await_sent(FRIEND, 3)
    await quiet_for(0.5, "a model call or a second notice to the owner would have come by now")
    assert texts(telegram, FRIEND) == ["answer: first question", SORRY, SORRY]
    assert len(models.requests) == 1, "no call for a held message"
    assert len(telegram.sent_messages(OWNER)) == 1, "one message to the owner per person and day"
    row = app.stores.db.query_one("SELECT people FROM model_usage")
    assert row is not None and row["people"] == f"telegram:{FRIEND}"


async def test_allowing_more_answers_what_was_held(telegram, models, start_bot):
    await _over_the_cap(telegram, models, start_bot)
    notice = await _notice(telegram)
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Allow 1,000"))
    assert await _answered(telegram, press) == "✓ Allowed 1,000 more today"
    answer = (await telegram.await_sent(FRIEND, 3))[-1]
    assert answer["text"] == "answer: second question"
    await eventually(lambda: telegram.inline_buttons(OWNER, notice["message_id"]) == [], "the buttons closed")


async def test_keeping_the_cap_answers_nothing(telegram, models, start_bot):
    await _over_the_cap(telegram, models, start_bot)
    notice = await _notice(telegram)
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Keep"))
    assert await _answered(telegram, press) == "✓ Cap kept"
    await quiet_for(0.5, "the held message would have been answered by now")
    assert len(models.requests) == 1 and len(telegram.sent_messages(FRIEND)) == 2


async def test_held_work_and_an_allowance_outlive_a_restart(telegram, models, start_bot):
    app = await _over_the_cap(telegram, models, start_bot)
    notice = await _notice(telegram)
    await app.stop()

    second = await allowing(start_bot, user_daily_tokens=CAP)
    await quiet_for(0.5, "the held message would have been answered or told again by now")
    assert len(models.requests) == 1 and len(telegram.sent_messages(FRIEND)) == 2
    assert len(telegram.sent_messages(OWNER)) == 1, "the owner was asked before the restart: not again"
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Allow until"))
    assert await _answered(telegram, press) == "✓ Allowed until tomorrow"
    assert (await telegram.await_sent(FRIEND, 3))[-1]["text"] == "answer: second question"
    await second.stop()

    restarted = await allowing(start_bot, user_daily_tokens=CAP)
    telegram.user_sends(FRIEND, "fourth question")
    assert (await telegram.await_sent(FRIEND, 4))[-1]["text"] == "answer: fourth question"
    assert restarted.models.caps.limit(f"telegram:{FRIEND}", CAP) is None


async def test_the_owner_is_exempt_from_the_per_person_cap_but_not_from_everyones(telegram, models, start_bot):
    models.responder(_answers)
    await start_bot(debounce_ms=0, user_daily_tokens=CAP)
    for n in range(2):
        telegram.user_sends(OWNER, f"owner question {n}")
        await telegram.await_sent(OWNER, n + 1)
    assert texts(telegram, OWNER) == ["answer: owner question 0", "answer: owner question 1"]


async def test_everyones_cap_holds_the_owner_too(telegram, models, start_bot):
    models.responder(_answers)
    await start_bot(debounce_ms=0, daily_tokens=CAP)
    telegram.user_sends(OWNER, "owner question")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(OWNER, "another")
    sent = await telegram.await_sent(OWNER, 3)
    assert SORRY in [m["text"] for m in sent]
    [notice] = [m for m in sent if telegram.inline_buttons(OWNER, m["message_id"])]
    assert notice["text"].startswith("Everyone together has used 1,200 of 1,000 tokens")
    assert len(models.requests) == 1


async def test_a_task_is_stopped_before_its_steps_call(telegram, models, start_bot):
    spawn = ToolCall("spawn", {"spec": "Count the stars.", "label": "stars"})
    models.script(Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on it"})], usage=(900, 300)), model="front")
    models.responder(lambda req: Reply(text="done", usage=(1, 1)), model="back")
    await allowing(
        start_bot, mode="bicameral", user_daily_tokens=CAP, delivery_pause_scale=0, task_retry_delay_seconds=0
    )
    telegram.user_sends(FRIEND, "count the stars for me")
    sent = await telegram.await_sent(FRIEND, 2)
    assert sent[0]["text"] == "on it"
    assert SORRY in sent[1]["text"], sent[1]["text"]
    await quiet_for(0.5, "a retry of the task would have called the back model by now")
    assert models.requests_for("back") == [], "the task's step made no call"
    assert len(telegram.sent_messages(FRIEND)) == 2


async def test_presses_from_anyone_else_forged_foreign_or_second_change_nothing(telegram, models, start_bot):
    await _over_the_cap(telegram, models, start_bot)
    notice = await _notice(telegram)
    allow = _button(telegram, notice, "Allow until")
    refused = {
        telegram.user_presses(OWNER, notice["message_id"], allow, user_id=FRIEND): NOT_YOURS,  # not the owner
        telegram.user_presses(OWNER, notice["message_id"], "c:AAAAAAAAAAAA:t"): UNKNOWN,  # forged token
        telegram.user_presses(OWNER, notice["message_id"] + 40, allow): UNKNOWN,  # not the notice's message
        telegram.user_presses(FRIEND, 1, allow, user_id=FRIEND): UNKNOWN,  # the owner's data, from another chat
    }
    for press, why in refused.items():
        assert await _answered(telegram, press) == why
    await quiet_for(0.5, "a press that allowed more would have answered the held message by now")
    assert len(models.requests) == 1 and len(telegram.sent_messages(FRIEND)) == 2

    first = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Keep"))
    second = telegram.user_presses(OWNER, notice["message_id"], allow)
    assert await _answered(telegram, first) == "✓ Cap kept"
    assert await _answered(telegram, second) == ANSWERED
    await quiet_for(0.5, "a second press that allowed more would have answered the held message by now")
    assert len(models.requests) == 1 and len(telegram.sent_messages(FRIEND)) == 2


async def test_the_next_utc_day_resets_the_cap_and_answers_what_was_held(telegram, models, start_bot):
    now = [1_800_000_000.0]  # a fixed instant, moved by hand
    await _over_the_cap(telegram, models, start_bot, clock=lambda: now[0])
    notice = await _notice(telegram)
    now[0] += DAY
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Allow until"))
    assert await _answered(telegram, press) == EXPIRED  # yesterday's question
    telegram.user_sends(FRIEND, "a new day")
    assert (await telegram.await_sent(FRIEND, 3))[-1]["text"] == "answer: a new day"
    asked = models.requests[-1].last_user_text()
    assert "second question" in asked and asked.index("second question") < asked.index("a new day"), "held first"


async def test_a_turn_that_crosses_the_cap_makes_no_more_calls_and_is_held(telegram, models, start_bot):
    def clock_then_answer(request: Request) -> Reply:
        if request.tool_results():
            return Reply(text="it is late")
        return Reply(tool_calls=[ToolCall("current_time", {"timezone": "UTC"})], usage=(800, 400))

    models.responder(clock_then_answer)
    await allowing(start_bot, user_daily_tokens=CAP)
    telegram.user_sends(FRIEND, "what time is it?")
    assert (await telegram.await_sent(FRIEND, 1))[0]["text"] == SORRY
    notice = await _notice(telegram)
    await quiet_for(0.3, "a call after the refused one would have come by now")
    assert len(models.requests) == 1, "the step after the cap was reached made no call"
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Allow until"))
    assert await _answered(telegram, press) == "✓ Allowed until tomorrow"
    assert (await telegram.await_sent(FRIEND, 2))[-1]["text"] == "it is late"  # the held message, run again


async def test_a_message_held_yesterday_is_answered_at_the_next_start(telegram, models, start_bot):
    now = [1_800_000_000.0]
    app = await _over_the_cap(telegram, models, start_bot, clock=lambda: now[0])
    await _notice(telegram)
    await app.stop()
    now[0] += DAY
    await allowing(start_bot, user_daily_tokens=CAP, clock=lambda: now[0])
    assert (await telegram.await_sent(FRIEND, 3))[-1]["text"] == "answer: second question"


async def test_usage_shows_the_caps_todays_spend_and_the_allowances(telegram, models, start_bot):
    await _over_the_cap(telegram, models, start_bot, daily_tokens=100_000)
    notice = await _notice(telegram)
    telegram.user_sends(OWNER, "/usage")
    usage = (await telegram.await_sent(OWNER, 2))[-1]["text"]
    assert "Spending caps, tokens per UTC day" in usage
    assert "• Everyone together: 1,200 of 100,000" in usage
    assert "• Each person but the owner: 1,000" in usage and f"• telegram:{FRIEND}: 1,200 of 1,000" in usage
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Allow 1,000"))
    assert await _answered(telegram, press) == "✓ Allowed 1,000 more today"
    await telegram.await_sent(FRIEND, 3)
    telegram.user_sends(OWNER, "/usage")
    usage = (await telegram.await_sent(OWNER, 3))[-1]["text"]
    assert f"• telegram:{FRIEND}: 2,400 of 2,000 (1,000 + 1,000 the owner allowed)" in usage


async def test_a_front_turn_refused_after_the_cap_was_crossed_is_held_until_allowed(telegram, models, start_bot):
    def front(request: Request) -> Reply:
        words = _answers(request).text
        slow = "first" in words  # the second message arrives while the first turn runs, under the cap
        return Reply(text=words, usage=(800, 400), latency=0.5 if slow else 0.0)

    models.responder(front, model="front")
    await allowing(start_bot, mode="bicameral", user_daily_tokens=CAP, delivery_pause_scale=0)
    telegram.user_sends(FRIEND, "first question")
    await models.await_requests(1, model="front")
    telegram.user_sends(FRIEND, "second question")  # through the desk now: still under the cap
    sent = await telegram.await_sent(FRIEND, 2)
    assert [m["text"] for m in sent] == ["answer: first question", SORRY]
    assert len(models.requests) == 1, "the second turn's front call was refused"
    notice = await _notice(telegram)
    press = telegram.user_presses(OWNER, notice["message_id"], _button(telegram, notice, "Allow until"))
    assert await _answered(telegram, press) == "✓ Allowed until tomorrow"
    assert (await telegram.await_sent(FRIEND, 3))[-1]["text"] == "answer: second question"

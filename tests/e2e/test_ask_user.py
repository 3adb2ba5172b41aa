"""ask_user end to end: the question goes out with a button per choice through the fake Bot API, and the pressed
choice (or a typed answer) comes back as the tool's result in the model's next request; a group member who was not
asked, a second press, forged data, another chat's message and a press after the deadline resume nothing; an open
question outlives a restart, its answer then arriving as the person's message."""

from __future__ import annotations

from bicameral.console.desk import STALE_BUTTON
from bicameral.tools.ask import ANSWERED, CLOSED, NO_ANSWER, NOT_YOURS, UNKNOWN
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually, quiet_for
from tests.support.group import ANN, BEN, GROUP, MENTION, says

ASK = ToolCall("ask_user", {"question": "Tea or coffee?", "choices": ["Tea", "Coffee"]})


def _asker(req: Request) -> Reply:
    """Asks when a drink comes up; after the answer, says what the tool returned."""
    results = req.tool_results()
    if results:
        return Reply(text="noted: " + results[0]["content"])
    if "drink" in req.last_user_text():
        return Reply(tool_calls=[ASK])
    return Reply(text="reply to: " + req.last_user_text()[-120:])


async def _question(telegram, chat: int) -> dict:
    """The question as sent, once it shows its buttons."""
    [sent] = await telegram.await_sent(chat, 1)
    assert telegram.inline_buttons(chat, sent["message_id"]), "the question has its buttons"
    return sent


async def _answered(telegram, query_id: str) -> str:
    """What the presser was told (the press's answer)."""
    answers = await eventually(lambda: telegram.press_answers().get(query_id), f"an answer to press {query_id}")
    return answers.get("text") or ""


def _data(telegram, chat: int, message_id: int, label: str) -> str:
    return dict(telegram.inline_buttons(chat, message_id))[label]


async def test_a_pressed_choice_is_the_tools_result(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot()
    telegram.user_sends(OWNER, "what drink should I have?")
    question = await _question(telegram, OWNER)
    assert question["text"] == "Tea or coffee?"
    buttons = telegram.inline_buttons(OWNER, question["message_id"])
    assert [label for label, _ in buttons] == ["Tea", "Coffee"]
    assert all(len(data.encode()) <= 64 and "Coffee" not in data for _, data in buttons), "opaque and short"

    press = telegram.user_presses(OWNER, question["message_id"], _data(telegram, OWNER, question["message_id"], "Coffee"))
    assert await _answered(telegram, press) == "✓ Coffee"
    reply = (await telegram.await_sent(OWNER, 2))[-1]
    assert reply["text"] == "noted: The user chose: Coffee"
    assert models.requests[1].tool_results()[0]["content"] == "The user chose: Coffee"
    await eventually(lambda: not telegram.inline_buttons(OWNER, question["message_id"]), "the buttons taken away")
    assert telegram.message(OWNER, question["message_id"])["text"].endswith("→ Coffee")


async def test_a_typed_answer_counts_and_starts_no_turn(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot()
    telegram.user_sends(OWNER, "any drink?")
    await _question(telegram, OWNER)
    telegram.user_sends(OWNER, "green tea, please")
    reply = (await telegram.await_sent(OWNER, 2))[-1]
    assert reply["text"] == "noted: The user answered: green tea, please"
    await quiet_for(1.0, "a turn started by the answer would have asked the model by now")
    assert len(models.requests) == 2, "the answer went to the waiting call, not to a new turn"


async def test_a_typed_choice_number_is_that_choice(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot()
    telegram.user_sends(OWNER, "drink time")
    await _question(telegram, OWNER)
    telegram.user_sends(OWNER, "2")
    assert (await telegram.await_sent(OWNER, 2))[-1]["text"] == "noted: The user chose: Coffee"


async def test_in_a_group_only_the_askers_answer_counts_and_needs_no_mention(
    telegram, models, start_bot, make_settings
):
    models.responder(_asker)
    write_access(make_settings(), policy="open")
    await start_bot()
    says(telegram, ANN, f"{MENTION} pick a drink for me")
    question = await _question(telegram, GROUP)
    coffee = _data(telegram, GROUP, question["message_id"], "Coffee")

    press = telegram.user_presses(GROUP, question["message_id"], coffee, user_id=BEN, first_name="Ben")
    assert await _answered(telegram, press) == NOT_YOURS
    says(telegram, BEN, "tea!")  # someone else's words, without a mention: neither an answer nor a turn
    await quiet_for(1.0, "Ben's press or words would have resumed the call by now")
    assert len(models.requests) == 1 and len(telegram.sent_messages(GROUP)) == 1

    says(telegram, ANN, "coffee")  # the asker's answer, with no mention
    reply = (await telegram.await_sent(GROUP, 2))[-1]
    assert reply["text"] == "noted: The user chose: Coffee"
    await quiet_for(0.5, "a stray turn would have asked the model by now")
    assert len(models.requests) == 2


async def test_no_answer_in_time_resumes_with_no_answer_and_closes_the_buttons(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot(ask_timeout_seconds=1)
    telegram.user_sends(OWNER, "drink?")
    question = await _question(telegram, OWNER)
    data = _data(telegram, OWNER, question["message_id"], "Tea")
    reply = (await telegram.await_sent(OWNER, 2, timeout=15))[-1]
    assert reply["text"] == f"noted: {NO_ANSWER}"

    press = telegram.user_presses(OWNER, question["message_id"], data)  # a button still on an old screen
    assert await _answered(telegram, press) == CLOSED
    await quiet_for(0.5, "a press that resumed something would have asked the model by now")
    assert len(models.requests) == 2


async def test_a_second_press_is_refused(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot()
    telegram.user_sends(OWNER, "drink?")
    question = await _question(telegram, OWNER)
    tea = _data(telegram, OWNER, question["message_id"], "Tea")
    coffee = _data(telegram, OWNER, question["message_id"], "Coffee")
    first = telegram.user_presses(OWNER, question["message_id"], tea)
    second = telegram.user_presses(OWNER, question["message_id"], coffee)
    assert await _answered(telegram, first) == "✓ Tea"
    assert await _answered(telegram, second) == ANSWERED
    assert (await telegram.await_sent(OWNER, 2))[-1]["text"] == "noted: The user chose: Tea"
    await quiet_for(0.5, "a second resumption would have asked the model by now")
    assert len(models.requests) == 2


async def test_forged_data_and_another_chats_message_resume_nothing(telegram, models, start_bot, make_settings):
    models.responder(_asker)
    write_access(make_settings(), policy="open")
    await start_bot()
    telegram.user_sends(OWNER, "drink?")
    question = await _question(telegram, OWNER)
    real = _data(telegram, OWNER, question["message_id"], "Coffee")
    token = real.split(":")[1]
    forged = [
        telegram.user_presses(OWNER, question["message_id"], "q:AAAAAAAAAAAA:0"),  # no such question
        telegram.user_presses(OWNER, question["message_id"], f"q:{token}:7"),  # no such choice
        telegram.user_presses(OWNER, question["message_id"] + 40, real),  # not the question's message
    ]
    telegram.user_sends(ANN, "hi")  # Ann's own chat, so it has a message to press on
    await telegram.await_sent(ANN, 1)
    forged.append(telegram.user_presses(ANN, 1, real, user_id=ANN))  # the owner's data, from another chat
    for query in forged:
        assert await _answered(telegram, query) == UNKNOWN
    garbage = telegram.user_presses(OWNER, question["message_id"], "garbage")  # no button of anything open
    assert await _answered(telegram, garbage) == STALE_BUTTON
    await quiet_for(0.5, "a forged press that resumed the call would have asked the model by now")
    assert len([r for r in models.requests if r.tool_results()]) == 0

    press = telegram.user_presses(OWNER, question["message_id"], real)
    assert await _answered(telegram, press) == "✓ Coffee"
    assert (await telegram.await_sent(OWNER, 2))[-1]["text"] == "noted: The user chose: Coffee"


async def test_a_malformed_press_is_answered_and_polling_goes_on(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot()
    telegram.push_raw_update({"callback_query": {"id": "55", "from": "nobody", "data": 3}})
    telegram.user_sends(OWNER, "hello")
    assert (await telegram.await_sent(OWNER, 1))[0]["text"].startswith("reply to:")
    assert [c.params.get("callback_query_id") for c in telegram.calls_to("answerCallbackQuery")] == ["55"]


async def test_after_a_restart_the_turn_asking_again_waits_on_the_question_on_screen(telegram, models, start_bot):
    models.responder(_asker)
    app = await start_bot()
    telegram.user_sends(OWNER, "drink?")
    question = await _question(telegram, OWNER)
    await models.await_requests(1)
    await app.stop()  # the waiting call dies with the process; the question stays open

    await start_bot()  # the unanswered message runs again, and the model asks the same again
    await models.await_requests(2)
    await quiet_for(0.5, "a second copy of the question would have been sent by now")
    assert len(telegram.sent_messages(OWNER)) == 1, "the question on screen is the one asked again"
    press = telegram.user_presses(OWNER, question["message_id"], _data(telegram, OWNER, question["message_id"], "Tea"))
    assert await _answered(telegram, press) == "✓ Tea"
    assert (await telegram.await_sent(OWNER, 2))[-1]["text"] == "noted: The user chose: Tea"


async def test_after_a_restart_an_answer_nothing_waits_for_arrives_as_the_persons_message(
    telegram, models, start_bot
):
    asked: list[Request] = []

    def ask_once(req: Request) -> Reply:
        if "drink" in req.last_user_text() and not asked:
            asked.append(req)
            return Reply(tool_calls=[ASK])
        return Reply(text="reply to: " + req.last_user_text()[-120:])

    models.responder(ask_once)
    app = await start_bot()
    telegram.user_sends(OWNER, "drink?")
    question = await _question(telegram, OWNER)
    await models.await_requests(1)
    await app.stop()

    await start_bot()  # the message runs again; this time the model answers without asking
    await telegram.await_sent(OWNER, 2)
    tea = _data(telegram, OWNER, question["message_id"], "Tea")
    press = telegram.user_presses(OWNER, question["message_id"], tea)
    assert await _answered(telegram, press) == "✓ Tea"
    reply = (await telegram.await_sent(OWNER, 3))[-1]
    assert "answering your question “Tea or coffee?”) Tea" in reply["text"]
    await eventually(lambda: not telegram.inline_buttons(OWNER, question["message_id"]), "the buttons taken away")
    again = telegram.user_presses(OWNER, question["message_id"], tea)  # a client that still shows them
    assert await _answered(telegram, again) == ANSWERED


async def test_the_tool_timeout_does_not_cut_the_wait_short(telegram, models, start_bot):
    models.responder(_asker)
    await start_bot(tool_timeout_seconds=0.5)
    telegram.user_sends(OWNER, "drink?")
    question = await _question(telegram, OWNER)
    await quiet_for(1.0, "the tool timeout would have ended the call by now")
    telegram.user_presses(OWNER, question["message_id"], _data(telegram, OWNER, question["message_id"], "Tea"))
    assert (await telegram.await_sent(OWNER, 2))[-1]["text"] == "noted: The user chose: Tea"


async def test_a_two_chamber_task_asks_and_gets_the_answer(telegram, models, start_bot):
    spawn = ToolCall("spawn", {"spec": "Choose a drink.", "label": "drink"})
    models.script(Reply(tool_calls=[spawn, ToolCall("reply", {"text": "on it"})]), model="front")
    voice = lambda req: Reply(text=req.last_user_text().split("<result>")[-1].split("</result>")[0].strip())  # noqa: E731
    models.responder(voice, model="front")

    def back(req: Request) -> Reply:
        results = req.tool_results()
        return Reply(text="Result: " + results[0]["content"]) if results else Reply(tool_calls=[ASK])

    models.responder(back, model="back")
    await start_bot(mode="bicameral", delivery_pause_scale=0, debounce_ms=150, task_retry_delay_seconds=0)
    telegram.user_sends(OWNER, "pick me a drink")
    sent = await telegram.await_sent(OWNER, 2)
    [question] = [m for m in sent if telegram.inline_buttons(OWNER, m["message_id"])]
    assert question["text"] == "Tea or coffee?"
    press = telegram.user_presses(OWNER, question["message_id"], _data(telegram, OWNER, question["message_id"], "Coffee"))
    assert await _answered(telegram, press) == "✓ Coffee"
    await eventually(
        lambda: any("The user chose: Coffee" in m["text"] for m in telegram.sent_messages(OWNER)), "the task's result"
    )

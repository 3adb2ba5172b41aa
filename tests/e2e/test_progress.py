"""A long single-mode turn shows the user it is still working, then gets out of the way of the answer."""

from __future__ import annotations

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import quiet_for


async def test_a_long_turn_shows_a_progress_note_edited_in_place_and_removed_before_the_answer(
    telegram, models, start_bot
):
    # The first model call is quick; the second thinks for longer than the note waits.
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {"timezone": "UTC"})]),
        Reply(text="It is noon.", latency=3),
    )
    await start_bot(progress_note_after_seconds=0.3)
    telegram.user_sends(OWNER, "what time is it?")
    [note, answer] = await telegram.await_sent(OWNER, 2, timeout=30)
    assert note["text"].startswith("Still working on it")
    assert answer["text"] == "It is noon."
    [deleted] = telegram.wait_for_call("deleteMessage")
    assert str(deleted.params["message_id"]) == str(note["message_id"])
    # The note was taken down before the answer went out.
    [send_answer] = [c for c in telegram.calls_to("sendMessage") if c.params.get("text") == "It is noon."]
    assert deleted.ts <= send_answer.ts


async def test_a_quick_turn_shows_no_note(telegram, models, start_bot):
    models.script(Reply(text="quick"), Reply(text="also quick"))
    await start_bot(progress_note_after_seconds=30)
    telegram.user_sends(OWNER, "hi")
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(OWNER, "again")
    sent = await telegram.await_sent(OWNER, 2)
    assert [m["text"] for m in sent] == ["quick", "also quick"]


async def test_a_note_telegram_refuses_for_now_is_not_shown_late_and_the_answer_is_not_held(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {"timezone": "UTC"})]),
        Reply(text="It is noon.", latency=3),
    )
    await start_bot(progress_note_after_seconds=0.3)
    telegram.fail_next("sendMessage", status=429, retry_after=30)  # the note's send
    telegram.user_sends(OWNER, "what time is it?")
    [answer] = await telegram.await_sent(OWNER, 1, timeout=20)
    assert answer["text"] == "It is noon."  # not 30 s later: the note is a status, sent at once or not at all
    await quiet_for(1, "a note sent after the answer, or a deletion of one, would have come by now")
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["It is noon."]
    assert telegram.calls_to("deleteMessage") == []


async def test_a_note_whose_removal_telegram_refuses_for_now_is_removed_after_the_wait_before_the_answer(
    telegram, models, start_bot
):
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {"timezone": "UTC"})]),
        Reply(text="It is noon.", latency=3),
    )
    await start_bot(progress_note_after_seconds=0.3)
    telegram.fail_next("deleteMessage", status=429, retry_after=1)
    telegram.user_sends(OWNER, "what time is it?")
    [note, answer] = await telegram.await_sent(OWNER, 2, timeout=30)
    assert note["text"].startswith("Still working on it") and answer["text"] == "It is noon."
    refused, deleted = telegram.wait_for_call("deleteMessage", 2)
    assert refused.status == 429 and str(deleted.params["message_id"]) == str(note["message_id"])
    [send_answer] = [c for c in telegram.calls_to("sendMessage") if c.params.get("text") == "It is noon."]
    assert deleted.ts - refused.ts >= 0.9 and deleted.ts <= send_answer.ts  # still taken down first
    assert telegram.sent_messages(OWNER)[0]["deleted"] is True

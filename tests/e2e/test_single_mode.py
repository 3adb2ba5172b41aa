"""What a Telegram user sees from the assistant in single mode, through the real client and fakes."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from bicameral.config import Settings
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.support.access import write_access
from tests.support.chat import until_sent


async def test_dm_gets_a_reply(telegram, models, start_bot):
    models.script(Reply(text="Hello! How can I help?"))
    await start_bot()
    telegram.user_sends(OWNER, "hi there")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "Hello! How can I help?"
    assert "hi there" in models.requests[0].last_user_text()


async def test_five_messages_in_two_seconds_make_one_model_request(telegram, models, start_bot):
    models.script(Reply(text="got all five"), Reply(text="and the follow-up"))
    await start_bot(debounce_ms=900)
    for i in range(5):
        telegram.user_sends(OWNER, f"part {i}")
        await asyncio.sleep(0.4)  # the user's typing pace, inside the debounce window
    await telegram.await_sent(OWNER, 1)
    telegram.user_sends(OWNER, "one more thing")
    await telegram.await_sent(OWNER, 2)
    # The follow-up's reply came second: no other request was made for the five parts.
    first, second = models.requests
    assert all(f"part {i}" in first.last_user_text() for i in range(5))
    assert "one more thing" in second.last_user_text() and "part 4" not in second.last_user_text()
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["got all five", "and the follow-up"]


async def test_message_sent_mid_turn_reaches_the_running_turn(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {})], latency=1.5),
        Reply(text="noted both"),
    )
    await start_bot(debounce_ms=100)
    telegram.user_sends(OWNER, "what time is it")
    await models.await_requests(1)
    telegram.user_sends(OWNER, "and also the date please")
    await telegram.await_sent(OWNER, 1)
    assert len(models.requests) == 2
    second = models.requests[1]
    assert "and also the date please" in second.last_user_text()
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["noted both"]


async def test_twenty_chats_are_answered_without_waiting_on_each_other(telegram, models, start_bot, make_settings):
    models.responder(lambda req: Reply(text="answer", latency=1.0))
    write_access(make_settings(), policy="open")
    await start_bot(debounce_ms=0)
    chats = [5000 + i for i in range(20)]
    for chat in chats:
        telegram.user_sends(chat, f"hello from {chat}")
    for chat in chats:
        await telegram.await_sent(chat, 1, timeout=20)
    requests = await models.await_completed(20)
    assert len(requests) == 20
    # Every request reached the model before any answer came back: no chat queued behind another.
    assert max(r.received_at for r in requests) < min(r.completed_at for r in requests)


async def test_telegram_429_on_send_is_retried_after_retry_after(telegram, models, start_bot):
    models.script(Reply(text="worth the wait"))
    telegram.fail_next("sendMessage", status=429, retry_after=1)
    await start_bot()
    telegram.user_sends(OWNER, "hello")
    sent = await telegram.await_sent(OWNER, 1, timeout=15)
    assert sent[0]["text"] == "worth the wait"
    sends = [c for c in telegram.calls if c.method.lower() == "sendmessage"]
    assert len(sends) == 2
    assert sends[1].ts - sends[0].ts >= 0.9


async def test_malformed_update_is_skipped_and_the_next_is_answered(telegram, models, start_bot, caplog):
    caplog.set_level(logging.WARNING)
    models.script(Reply(text="still here"))
    await start_bot()
    telegram.push_raw_update({"message": {"text": 3, "chat": "nonsense"}})
    telegram.user_sends(OWNER, "are you alive?")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "still here"
    assert any("malformed update" in r.getMessage() for r in caplog.records)
    assert telegram.pending_updates == 0 or telegram.acked_offset > 0


async def test_a_ten_thousand_character_reply_arrives_split(telegram, models, start_bot):
    paragraphs = [f"Paragraph {i}: " + ("lorem ipsum dolor sit amet " * 18).strip() for i in range(20)]
    long_text = "\n\n".join(paragraphs)
    assert len(long_text) >= 10000
    models.script(Reply(text=long_text), Reply(text="you're welcome"))
    await start_bot()
    telegram.user_sends(OWNER, "write me a lot")
    await telegram.await_sent(OWNER, 3)
    telegram.user_sends(OWNER, "thanks")
    await until_sent(telegram, OWNER, "you're welcome")
    *sent, last = telegram.sent_messages(OWNER)
    assert len(sent) >= 3 and last["text"] == "you're welcome"
    assert all(len(m["text"]) <= 4096 for m in sent)
    joined = " ".join(m["text"] for m in sent)
    assert all(f"Paragraph {i}:" in joined for i in range(20))


async def test_blocked_user_gets_nothing_from_the_model(telegram, models, start_bot):
    app = await start_bot()
    stranger = 777
    telegram.user_sends(stranger, "let me in")
    notice = await telegram.await_sent(stranger, 1)
    telegram.user_sends(stranger, "hello??")
    telegram.user_sends(OWNER, "ping")
    await telegram.await_sent(OWNER, 2)  # the digest of refused senders, and the answer
    assert len(models.requests) == 1
    assert "let me in" not in json.dumps(models.requests[0].raw)
    assert "private assistant" in notice[0]["text"]
    assert len(telegram.sent_messages(stranger)) == 1
    assert app.stores.unauthorized.count(f"telegram:{stranger}") == 2


async def test_stop_cancels_the_running_turn(telegram, models, start_bot):
    models.script(Reply(text="too late", latency=2), Reply(text="still here"))
    await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "do something slow")
    await models.await_requests(1)
    telegram.user_sends(OWNER, "/stop")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "Stopped."
    await models.await_completed(1)  # the model answered "too late": had the turn lived on, it would be sent now
    telegram.user_sends(OWNER, "are you there?")
    await telegram.await_sent(OWNER, 2)
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["Stopped.", "still here"]


async def test_typing_indicator_is_refreshed_while_a_turn_runs(telegram, models, start_bot):
    models.script(Reply(text="done", latency=1.6))
    await start_bot(typing_interval_seconds=0.5, typing_delay_seconds=0.0)
    telegram.user_sends(OWNER, "think hard")
    await telegram.await_sent(OWNER, 1)
    typing = [c for c in telegram.chat_actions(OWNER) if c.params.get("action") == "typing"]
    assert len(typing) >= 3


async def test_typing_shows_only_once_a_turn_has_taken_a_moment(telegram, models, start_bot):
    models.script(Reply(text="slow", latency=2.0))
    await start_bot()  # the default delay
    sent_at = time.monotonic()
    telegram.user_sends(OWNER, "think about it")
    await telegram.await_sent(OWNER, 1)
    typing = telegram.chat_actions(OWNER)
    assert typing, "a 2 s turn shows typing"
    assert typing[0].ts - sent_at >= Settings.model_fields["typing_delay_seconds"].default


async def test_session_survives_a_restart_and_reset_clears_it(telegram, models, start_bot):
    models.script(Reply(text="nice to meet you, Ada"), Reply(text="you are Ada"), Reply(text="I don't know"))
    app = await start_bot()
    telegram.user_sends(OWNER, "my name is Ada")
    await telegram.await_sent(OWNER, 1)
    await app.stop()
    await start_bot()
    telegram.user_sends(OWNER, "who am I?")
    await telegram.await_sent(OWNER, 2)
    assert "my name is Ada" in json.dumps(models.requests[1].messages)
    telegram.user_sends(OWNER, "/reset")
    await telegram.await_sent(OWNER, 3)
    telegram.user_sends(OWNER, "who am I now?")
    await telegram.await_sent(OWNER, 4)
    assert "my name is Ada" not in json.dumps(models.requests[2].messages)


async def test_group_answers_only_when_addressed(telegram, models, start_bot, make_settings):
    group = -100200
    models.script(Reply(text="yes, I'm here"), Reply(text="noon works"))
    write_access(make_settings(), policy="allowlist", allowed_chats=[group])
    await start_bot()
    team = {"chat_type": "supergroup", "chat_title": "Team"}
    telegram.user_sends(group, "lunch at noon?", user_id=OWNER, **team)
    telegram.user_sends(group, "sure", user_id=2002, first_name="Bob", **team)
    telegram.user_sends(group, "@bicameral_test_bot are you there?", user_id=OWNER, **team)
    await telegram.await_sent(group, 1)
    telegram.user_sends(group, "sounds good", user_id=2002, first_name="Bob", **team)
    telegram.user_sends(group, "@bicameral_test_bot does noon work?", user_id=OWNER, **team)
    await telegram.await_sent(group, 2)
    # Two addressed messages, two requests: nothing overheard started a turn of its own.
    first, second = models.requests
    assert "are you there" in first.last_user_text() and "does noon work" in second.last_user_text()
    assert [m["text"] for m in telegram.sent_messages(group)] == ["yes, I'm here", "noon works"]


async def test_huge_hostile_text_is_truncated_not_fatal(telegram, models, start_bot):
    models.script(Reply(text="that was long"))
    await start_bot(max_inbound_chars=2000)
    telegram.user_sends(OWNER, ("\u202e\u200b" + "A" * 50) * 80)
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "that was long"
    prompt = models.requests[0].last_user_text()
    assert "message truncated" in prompt
    assert "\u202e" not in prompt and "\u200b" not in prompt
    assert "bidi_stripped" in prompt


async def test_tool_calls_are_audited(telegram, models, start_bot):
    models.script(Reply(tool_calls=[ToolCall("current_time", {"timezone": "Mars/Olympus"})]), Reply(text="sorry"))
    app = await start_bot()
    telegram.user_sends(OWNER, "time on mars?")
    await telegram.await_sent(OWNER, 1)
    rows = app.stores.tool_calls.recent()
    assert rows[0]["name"] == "current_time"
    assert "unknown time zone" in rows[0]["error"]
    assert "unknown time zone" in models.requests[1].tool_results()[0]["content"]


PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5f0000000049454e44ae426082"
)


async def test_a_photo_is_shown_to_the_model_but_its_bytes_never_reach_the_session(telegram, models, start_bot):
    models.script(Reply(text="a tiny image"))
    app = await start_bot()
    telegram.user_sends(OWNER, photo=PNG_1PX, caption="what is this?")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "a tiny image"
    request = json.dumps(models.requests[0].raw)
    assert "what is this?" in request and "base64" in request
    stored = json.dumps(app.stores.sessions.load(f"telegram:{OWNER}"))
    assert "[image: attachments/" in stored
    assert "base64" not in stored and "iVBOR" not in stored


async def test_model_garbage_gets_the_same_sentence_as_a_model_failure(telegram, models, start_bot):
    models.script(
        Reply(error_status=500, error_message="upstream exploded"),
        Reply(text="never whole", malformed="html"),
        Reply(text="never whole", malformed="truncated_json"),
        Reply(text="never whole", malformed="empty_choices"),
        Reply(text="back to normal"),
    )
    await start_bot(debounce_ms=0, model_max_retries=0)
    for n, text in enumerate(["one", "two", "three", "four", "five"], start=1):
        telegram.user_sends(OWNER, text)
        await telegram.await_sent(OWNER, n)
    failure, *garbage, recovered = [m["text"] for m in telegram.sent_messages(OWNER)]
    assert garbage == [failure] * 3 and "upstream exploded" not in failure
    assert recovered == "back to normal"


"""What a Telegram user sees from the assistant in single mode, through the real client and fakes."""

from __future__ import annotations

import asyncio
import json
import logging

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall


async def test_dm_gets_a_reply(telegram, models, start_bot):
    models.script(Reply(text="Hello! How can I help?"))
    await start_bot()
    telegram.user_sends(OWNER, "hi there")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "Hello! How can I help?"
    assert "hi there" in models.requests[0].last_user_text()


async def test_five_messages_in_two_seconds_make_one_model_request(telegram, models, start_bot):
    models.script(Reply(text="got all five"))
    await start_bot(debounce_ms=900)
    for i in range(5):
        telegram.user_sends(OWNER, f"part {i}")
        await asyncio.sleep(0.4)
    sent = await telegram.await_sent(OWNER, 1)
    await asyncio.sleep(1.0)
    assert len(models.requests) == 1
    prompt = models.requests[0].last_user_text()
    assert all(f"part {i}" in prompt for i in range(5))
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["got all five"]
    assert sent[0]["text"] == "got all five"


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


async def test_twenty_chats_are_answered_without_waiting_on_each_other(telegram, models, start_bot, tmp_path):
    models.responder(lambda req: Reply(text="answer", latency=1.0))
    app = await start_bot(debounce_ms=0)
    app.gate._access.save(app.gate._access.config.model_copy(update={"policy": "open"}))
    chats = [5000 + i for i in range(20)]
    for chat in chats:
        telegram.user_sends(chat, f"hello from {chat}")
    for chat in chats:
        await telegram.await_sent(chat, 1, timeout=20)
    requests = models.requests
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
    models.script(Reply(text=long_text))
    await start_bot()
    telegram.user_sends(OWNER, "write me a lot")
    await telegram.await_sent(OWNER, 3)
    await asyncio.sleep(0.5)
    sent = telegram.sent_messages(OWNER)
    assert len(sent) >= 3
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
    models.script(Reply(text="too late", latency=2))
    await start_bot(debounce_ms=0)
    telegram.user_sends(OWNER, "do something slow")
    await models.await_requests(1)
    telegram.user_sends(OWNER, "/stop")
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "Stopped."
    await asyncio.sleep(2.5)  # past the model's latency: had the turn lived on, "too late" would be here
    assert [m["text"] for m in telegram.sent_messages(OWNER)] == ["Stopped."]


async def test_typing_indicator_is_refreshed_while_a_turn_runs(telegram, models, start_bot):
    models.script(Reply(text="done", latency=1.6))
    await start_bot(typing_interval_seconds=0.5)
    telegram.user_sends(OWNER, "think hard")
    await telegram.await_sent(OWNER, 1)
    typing = [c for c in telegram.chat_actions(OWNER) if c.params.get("action") == "typing"]
    assert len(typing) >= 3


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


async def test_group_answers_only_when_addressed(telegram, models, start_bot):
    group = -100200
    models.script(Reply(text="yes, I'm here"))
    app = await start_bot()
    app.gate._access.save(app.gate._access.config.model_copy(update={"policy": "allowlist", "allowed_chats": [group]}))
    telegram.user_sends(group, "lunch at noon?", user_id=OWNER, chat_type="supergroup", chat_title="Team")
    telegram.user_sends(group, "sure", user_id=2002, first_name="Bob", chat_type="supergroup", chat_title="Team")
    telegram.user_sends(group, "@bicameral_test_bot are you there?", user_id=OWNER, chat_type="supergroup", chat_title="Team")
    sent = await telegram.await_sent(group, 1)
    await asyncio.sleep(0.5)
    assert len(models.requests) == 1
    assert "are you there" in models.requests[0].last_user_text()
    assert sent[0]["text"] == "yes, I'm here"


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

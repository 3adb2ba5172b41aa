"""The gate against hostile users and groups, through the fake Bot API and the scripted model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.fakes.telegram_server import FakeTelegram

STRANGER = 777
GROUP = -100555


async def eventually(check: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def calls_to_chat(telegram: FakeTelegram, method: str, chat_id: int) -> list:
    return [c for c in telegram.calls_to(method) if str(c.params.get("chat_id")) == str(chat_id)]


# --- 8.10: nothing slow on the intake path ---


async def test_a_held_refusal_notice_does_not_delay_the_owner(telegram, models, start_bot):
    models.script(Reply(text="owner answered"))
    await start_bot(debounce_ms=0)
    released = telegram.hold("sendMessage", STRANGER)
    try:
        telegram.user_sends(STRANGER, "let me in")
        await eventually(lambda: calls_to_chat(telegram, "sendMessage", STRANGER), "the stranger's notice to be sent")
        telegram.user_sends(OWNER, "ping")
        sent = await telegram.await_sent(OWNER, 1, timeout=15)
        assert sent[0]["text"] == "owner answered"
        # The stranger's notice is still held by Telegram while the owner already has an answer.
        assert telegram.sent_messages(STRANGER) == []
    finally:
        released.set()
    notice = await telegram.await_sent(STRANGER, 1)
    assert "private assistant" in notice[0]["text"]


async def test_a_rate_limited_notice_on_429_does_not_delay_the_owner(telegram, models, start_bot):
    models.responder(lambda req: Reply(text="answer"))
    app = await start_bot(debounce_ms=0, rate_limit_per_min=1)
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "open"}))
    released = telegram.hold("sendMessage", STRANGER)
    try:
        telegram.user_sends(STRANGER, "one")
        telegram.user_sends(STRANGER, "two")  # over the limit: the notice is held
        await eventually(lambda: len(calls_to_chat(telegram, "sendMessage", STRANGER)) >= 1, "a send to the stranger")
        telegram.user_sends(OWNER, "ping")
        sent = await telegram.await_sent(OWNER, 1, timeout=15)
        assert sent[0]["text"] == "answer"
        assert telegram.sent_messages(STRANGER) == []
    finally:
        released.set()
    texts = [m["text"] for m in await telegram.await_sent(STRANGER, 2)]
    assert any("faster than I can read" in t for t in texts)


# --- 8.9: /stop and /reset in groups ---

MEMBER = 2002


def in_group(telegram: FakeTelegram, text: str, user_id: int, name: str = "Bob") -> dict:
    return telegram.user_sends(GROUP, text, user_id=user_id, first_name=name, chat_type="supergroup", chat_title="Team")


async def allow_group(start_bot, **overrides):
    app = await start_bot(**overrides)
    app.gate.access.save(app.gate.access.config.model_copy(update={"policy": "allowlist", "allowed_chats": [GROUP]}))
    return app


async def test_a_members_stop_does_not_stop_the_owners_turn(telegram, models, start_bot):
    models.script(Reply(text="the owner's answer", latency=2.0))
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot summarise the thread", OWNER, "Owner")
    await models.await_requests(1)
    in_group(telegram, "/stop", MEMBER)
    texts = [m["text"] for m in await telegram.await_sent(GROUP, 2, timeout=20)]
    assert "the owner's answer" in texts
    refusal = next(t for t in texts if t != "the owner's answer")
    assert "only the owner" in refusal.lower()


async def test_a_members_stop_stops_their_own_turn(telegram, models, start_bot):
    models.script(Reply(text="never delivered", latency=5.0))
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot write me an essay", MEMBER)
    await models.await_requests(1)
    in_group(telegram, "/stop", MEMBER)
    sent = await telegram.await_sent(GROUP, 1)
    assert sent[0]["text"] == "Stopped."


async def test_the_owners_stop_stops_a_members_turn(telegram, models, start_bot):
    models.script(Reply(text="never delivered", latency=5.0))
    await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot write me an essay", MEMBER)
    await models.await_requests(1)
    in_group(telegram, "/stop", OWNER, "Owner")
    sent = await telegram.await_sent(GROUP, 1)
    assert sent[0]["text"] == "Stopped."


async def test_a_members_reset_of_the_group_is_refused(telegram, models, start_bot):
    models.responder(lambda req: Reply(text="remembered"))
    app = await allow_group(start_bot, debounce_ms=0)
    in_group(telegram, "@bicameral_test_bot the codeword is heron", OWNER, "Owner")
    await telegram.await_sent(GROUP, 1)
    in_group(telegram, "/reset", MEMBER)
    sent = await telegram.await_sent(GROUP, 2)
    assert "only the owner" in sent[1]["text"].lower()
    assert "heron" in str(app.stores.sessions.load(f"telegram:{GROUP}"))
    in_group(telegram, "/reset", OWNER, "Owner")
    sent = await telegram.await_sent(GROUP, 3)
    assert sent[2]["text"].startswith("Fresh start")
    assert app.stores.sessions.load(f"telegram:{GROUP}") == []

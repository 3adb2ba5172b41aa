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

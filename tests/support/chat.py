"""Waiting on what a chat received from the fake Telegram server."""

from __future__ import annotations

from typing import Any


async def until_sent(telegram: Any, chat: int, text: str, timeout: float = 20.0) -> None:
    """Wait until `text` was sent to `chat`, after however many messages come before it."""
    count = 1
    while text not in [m["text"] for m in await telegram.await_sent(chat, count, timeout=timeout)]:
        count = len(telegram.sent_messages(chat)) + 1

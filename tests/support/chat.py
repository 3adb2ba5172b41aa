"""Waiting on what a chat received from the fake Telegram server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def until_sent(telegram: Any, chat: int, text: str, timeout: float = 20.0) -> None:
    """Wait until `text` was sent to `chat`, after however many messages come before it."""
    count = 1
    while text not in [m["text"] for m in await telegram.await_sent(chat, count, timeout=timeout)]:
        count = len(telegram.sent_messages(chat)) + 1


async def eventually(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Wait until `predicate()` holds (a row exists, a state changed), checking every 50 ms."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)

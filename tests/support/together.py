"""A model that answers only once `count` requests wait at the same time: the proof that turns ran at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from tests.fakes.model_server import Reply


def answered_together(count: int, text: str = "answered", *, timeout: float = 120) -> tuple[
    Callable[[Any], Awaitable[Reply]], threading.Event
]:
    """A responder for the fake model server, and the event set once `count` requests waited together."""
    together = threading.Event()
    waiting: list[Any] = []

    async def respond(request: Any) -> Reply:
        waiting.append(request)
        if len(waiting) >= count:
            together.set()
        await asyncio.to_thread(together.wait, timeout)
        return Reply(text=text)

    return respond, together

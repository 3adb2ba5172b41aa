"""The live feed: the transcript's lines (in, out, each tool call and result) as they are logged, and the web chat's
messages, to every open page."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

from bicameral.dashboard.pages import chat_fragment, line_fragment, removed_fragment

Event = tuple[str, str]  # (SSE event name, HTML fragment)
QUEUE_LINES = 200  # a page that reads no more than this falls behind and is dropped, never the chat
KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a message id that can name a bubble (ours are `<ms>-<n>`)


class LiveFeed(logging.Handler):
    """A handler on the `bicameral.tx` logger: every record becomes one line for each subscriber's queue.

    Records may come from any thread; lines are put on the queues on the loop's own thread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, redact: Callable[[str], str]) -> None:
        super().__init__(level=logging.INFO)
        self._loop = loop
        self._redact = redact
        self._queues: set[asyncio.Queue[Event | None]] = set()

    def subscribe(self) -> asyncio.Queue[Event | None]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=QUEUE_LINES)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event | None]) -> None:
        self._queues.discard(queue)

    @property
    def subscribers(self) -> int:
        return len(self._queues)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self._redact(record.getMessage())
        except Exception:
            self.handleError(record)
            return
        self._loop.call_soon_threadsafe(self._fan_out, ("line", line_fragment(line)))

    def publish(self, who: str, text: str, key: str | None = None, *, edit: bool = False) -> None:
        """A web chat message, on the loop's thread; `key` names its bubble, which `edit` replaces in place."""
        named = key if key is not None and KEY.fullmatch(key) else None
        if edit and named is None:
            text = f"(edited) {text}"  # no bubble of ours to replace: shown as a new one
        self._fan_out(("chat", chat_fragment(who, self._redact(text), named, edit=edit and named is not None)))

    def retract(self, key: str) -> None:
        """Take a bubble off every open page (a deleted message)."""
        if KEY.fullmatch(key):
            self._fan_out(("chat", removed_fragment(key)))

    def _fan_out(self, event: Event) -> None:
        for queue in list(self._queues):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                # A page that stopped reading: it is cut off (None ends its stream) and its lines go no further.
                self._queues.discard(queue)
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(None)

    def close_all(self) -> None:
        for queue in list(self._queues):
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(None)
        self._queues.clear()

"""A long turn's visible progress: one status message, edited in place with the latest step, removed at the end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from bicameral.events import DeleteMessage, EditText, SendText
from bicameral.types import Clock, Perform, Sleep

log = logging.getLogger(__name__)


class ProgressNote:
    """Shows that a turn is still working once it has run `after` seconds, with its latest step.

    The note is one message: later steps edit it (at most every `edit_every` seconds, so a burst of
    tool calls is one edit, made when the interval is up), and `close` deletes it, since the answer
    that follows is what the user came for. A failure is logged, never raised.

    When the platform asks us to slow down: the note is a "status" text, shown at once or not at all,
    so it never turns up late or lingers; an edit or the deletion waits in the outbox, and once an edit
    waits there the note is not edited again (every later edit would only queue behind it).
    """

    def __init__(
        self,
        perform: Perform,
        chat: str,
        *,
        after: float,
        thread_id: str | None = None,
        edit_every: float = 3.0,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._perform = perform
        self._chat = chat
        self._after = after
        self._thread_id = thread_id
        self._edit_every = edit_every
        self._clock = clock
        self._sleep = sleep
        self._steps = 0
        self._latest: str | None = None
        self._message_id: str | None = None
        self._shown = ""
        self._edited_at = 0.0
        self._showing = False  # the first send is under way: close waits for it instead of cancelling it
        self._edit_waiting = False  # an edit waits in the outbox: no more edits
        self._timer: asyncio.Task[None] | None = None
        self._trailing: asyncio.Task[None] | None = None  # the edit a burst of steps is waiting for
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Arm the timer; with `after` at 0 the note is off."""
        if self._after > 0:
            self._timer = asyncio.create_task(self._show_later(), name=f"progress:{self._chat}")

    async def step(self, description: str) -> None:
        """Record the step the turn just began; edits the note when one is showing."""
        self._steps += 1
        self._latest = description
        if self._message_id is None or self._edit_waiting:
            return
        wait = self._edited_at + self._edit_every - self._clock()
        if wait <= 0:
            async with self._lock:
                await self._edit()
        elif self._trailing is None or self._trailing.done():
            self._trailing = asyncio.create_task(self._edit_later(wait), name=f"progress-edit:{self._chat}")

    async def close(self) -> None:
        """Stop the timer and take the note down; safe to call when it never showed."""
        timer, self._timer = self._timer, None
        if self._trailing is not None:
            self._trailing.cancel()
        if timer is not None and not timer.done():
            if self._showing:
                await asyncio.shield(timer)
            else:
                timer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await timer
        async with self._lock:
            if self._message_id is not None:
                result = await self._perform(DeleteMessage(chat=self._chat, message_id=self._message_id))
                if not result.ok:
                    log.info("progress note in %s not removed: %s", self._chat, result.error)
                self._message_id = None

    def text(self) -> str:
        """What the note says now."""
        if self._latest is None:
            return "Still working on it…"
        return f"Still working on it… step {self._steps}: {self._latest}"

    async def _show_later(self) -> None:
        await self._sleep(self._after)
        async with self._lock:
            self._showing = True
            text = self.text()
            result = await self._perform(SendText(chat=self._chat, text=text, thread_id=self._thread_id, purpose="status"))
            self._showing = False
            if result.ok and result.message_ids:
                self._message_id, self._shown, self._edited_at = result.message_ids[0], text, self._clock()
            else:
                log.info("progress note in %s not shown: %s", self._chat, result.error)

    async def _edit_later(self, wait: float) -> None:
        await self._sleep(wait)
        async with self._lock:
            await self._edit()

    async def _edit(self) -> None:
        text = self.text()
        if self._message_id is None or self._edit_waiting or text == self._shown:
            return
        result = await self._perform(EditText(chat=self._chat, message_id=self._message_id, text=text))
        if result.queued:
            self._edit_waiting = True
            log.info("progress note in %s: an edit waits in the outbox; no more edits", self._chat)
        if result.ok:
            self._shown, self._edited_at = text, self._clock()
        else:
            log.info("progress note in %s not edited: %s", self._chat, result.error)

"""A turn's reply shown while the model writes it: the text deltas of the call that writes the reply become Draft
actions for the turn's chat, at most one every `interval` seconds, sent by a task of their own so the model's
stream never waits on a channel. Only a channel with `Capabilities.drafts` is handed them (the router refuses the
rest, and the first refusal ends drafting for the turn)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from bicameral.events import Action, ActionResult, Draft
from bicameral.models.base import Message, Model, ModelEvent, TextDelta, ToolCall, ToolSpec

log = logging.getLogger(__name__)
INTERVAL = 0.1  # seconds between two updates of one turn's draft: at most ten a second, whatever the model's pace


class DraftStream:
    """One turn's draft. The model's side (`begin`, `show`, `drop`) never waits; the chamber `settle`s it before
    the reply is sent (no update may follow the reply) and `close`s it after (a draft no reply took is taken away)."""

    def __init__(
        self, perform: Callable[[Action], Awaitable[ActionResult]], chat: str, key: str, *, interval: float = INTERVAL
    ) -> None:
        self.key = key
        self._perform = perform
        self._chat = chat
        self._interval = interval
        self._parts: list[str] = []
        self._muted = False  # this call's text is not the reply (a tool call came, the call failed)
        self._shown = ""  # what the channel shows now
        self._off = False  # the channel shows no drafts, or the reply is on its way
        self._wake = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    def begin(self) -> None:
        """A model call starts: its text is the draft from now on (an earlier call's is replaced)."""
        self._parts, self._muted = [], False
        self._poke()

    def show(self, delta: str) -> None:
        """A piece of the reply as it streams."""
        if not self._muted:
            self._parts.append(delta)
            self._poke()

    def drop(self) -> None:
        """The running call's text will not be the reply: take what is shown away, show no more of it."""
        self._muted = True
        self._poke()

    async def settle(self) -> None:
        """No more updates: the reply (a SendText naming `key`) follows and takes the draft's place."""
        self._off = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None

    async def close(self) -> None:
        """The turn is over: a draft still shown that no reply took (tool-only, failed, stopped) is taken away."""
        await self.settle()
        if self._shown:
            self._shown = ""
            await self._perform(Draft(self._chat, self.key, ""))

    async def __aenter__(self) -> DraftStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _poke(self) -> None:
        if self._off:
            return
        self._wake.set()
        if self._sender is None:
            self._sender = asyncio.create_task(self._send(), name=f"draft:{self._chat}")

    def _visible(self) -> str:
        """The text so far up to its last space: a word (or a secret the redactor would know whole) shows complete."""
        if self._muted:
            return ""
        text = "".join(self._parts)
        cut = max(text.rfind(" "), text.rfind("\n"))
        return text[:cut].rstrip() if cut > 0 else ""

    async def _send(self) -> None:
        while not self._off:
            await self._wake.wait()
            self._wake.clear()
            text = self._visible()
            if text == self._shown:
                continue
            # Counted as shown before it is: a draft cut off on its way is still taken away by `close`.
            self._shown = text
            try:
                result = await self._perform(Draft(self._chat, self.key, text))
            except Exception:  # a channel's bug must cost the draft, never the reply
                log.exception("draft for %s failed", self._chat)
                result = ActionResult.failed("the draft failed")
            if not result.ok:
                self._off, self._shown = True, ""  # no drafts on this channel: the reply arrives whole, as ever
                return
            await asyncio.sleep(self._interval)  # what streams meanwhile is coalesced into the next update


class Drafting:
    """Wraps the model whose text is the turn's reply: each call's text deltas go to the draft as they stream.

    `final_only`: a call that makes a tool call is not the reply (single mode: the runner goes on, and only the
    last call's text is sent), so its text is taken away at its first tool call. The front's text is its reply even
    beside its actions (`final_only=False`)."""

    def __init__(self, model: Model, draft: DraftStream, *, final_only: bool) -> None:
        self.inner = model
        self.name = model.name
        self._draft = draft
        self._final_only = final_only

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        self._draft.begin()
        try:
            async for event in self.inner.stream(system, messages, tools, max_tokens):
                if isinstance(event, TextDelta):
                    self._draft.show(event.text)
                elif isinstance(event, ToolCall) and self._final_only:
                    self._draft.drop()
                yield event
        except BaseException:
            self._draft.drop()  # failed or cancelled: no reply from this call
            raise

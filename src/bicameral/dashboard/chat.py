"""The web chat: the dashboard's chat panel as a channel of its own, where whoever holds a dashboard session (the
owner) talks to the assistant like at the terminal; replies reach every open page through the live stream, shown
as they are written (Draft actions) and replaced by the reply itself."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Protocol

from bicameral.channels.base import InboundSink, OnEnd
from bicameral.events import (
    Action,
    ActionResult,
    Capabilities,
    CommandMenu,
    DeleteMessage,
    Draft,
    EditText,
    Inbound,
    Sender,
    SendFile,
    SendText,
    chat_key,
)
from bicameral.text import normalize
from bicameral.types import Clock

WEB = "web"  # a trusted channel (events.TRUSTED_CHANNELS): only a dashboard session reaches it
CHAT = chat_key(WEB, "owner")
DRAFTING = " …"  # after a draft's text: still being written



class Publish(Protocol):
    """A chat message to show on every open page; `who` is "you" or the bot's name; `key` names its bubble, which a
    later `edit` replaces."""

    def __call__(self, who: str, text: str, key: str | None = None, *, edit: bool = False) -> None: ...


def _nowhere(who: str, text: str, key: str | None = None, *, edit: bool = False) -> None:
    """Before the dashboard's live stream runs, nothing is shown."""


class WebChannel:
    name = WEB
    capabilities = Capabilities(max_text=100_000, typing=False, threads=False, buttons=False, drafts=True)

    def __init__(self, bot_name: str, *, clock: Clock = time.time) -> None:
        self._bot_name = bot_name
        self._clock = clock
        self._sink: InboundSink | None = None
        self._ids = itertools.count(1)
        self._user = Sender(id="owner", name="you")
        self.publish: Publish = _nowhere  # the dashboard's live stream, once it runs
        self.retract: Callable[[str], None] = lambda key: None
        self._drafts: dict[str, str] = {}  # a turn's draft key → the id of its bubble, while it shows

    def _next_id(self) -> str:
        # Unique across restarts too: the store keeps (chat, message id) once.
        return f"{int(self._clock() * 1000)}-{next(self._ids)}"

    async def start(self, sink: InboundSink, on_end: OnEnd) -> None:
        self._sink = sink

    async def stop(self) -> None:
        self._sink = None

    async def submit(self, text: str) -> bool:
        """A message typed into the panel, handed to the gate like any channel's; False when not running."""
        text = normalize(text).text.strip()
        if self._sink is None or not text:
            return False
        self.publish("you", text)
        await self._sink([Inbound(
            channel=WEB, chat=CHAT, message_id=self._next_id(), sender=self._user, text=text, ts=self._clock(),
            kind="command" if text.startswith("/") else "message",
        )])
        return True

    async def perform(self, action: Action) -> ActionResult:
        if isinstance(action, Draft):
            self._draft(action)
        elif isinstance(action, SendText):
            choices = "".join(f"\n  {n}. {label}" for n, (label, _) in enumerate(action.buttons, 1))
            drafted = self._drafts.pop(action.draft, None) if action.draft is not None else None
            if drafted is not None:
                # The reply takes its draft's place: the draft leaves and the reply comes under the same id, last, so a
                # page opened after the draft began (which never had its bubble) still shows the reply.
                self.retract(drafted)
            message_id = drafted or self._next_id()
            self.publish(self._bot_name, action.text + choices, message_id)
            return ActionResult(ok=True, message_ids=(message_id,))
        if isinstance(action, EditText):  # the progress note's steps, an edited message: its bubble changes in place
            self.publish(self._bot_name, action.text, action.message_id, edit=True)
        elif isinstance(action, DeleteMessage):
            self.retract(action.message_id)
        elif isinstance(action, SendFile):
            self.publish(self._bot_name, f"[{action.kind}: {PurePosixPath(action.path).name}] {action.caption or ''}".strip())
            return ActionResult(ok=True, message_ids=(self._next_id(),))
        return ActionResult(ok=True)  # typing, reactions: nothing to show in the panel

    def _draft(self, draft: Draft) -> None:
        """A reply as it is written: one bubble per turn, changed in place (marked unfinished), taken away when empty."""
        bubble = self._drafts.get(draft.key)
        if not draft.text:
            if bubble is not None:
                del self._drafts[draft.key]
                self.retract(bubble)
        elif bubble is None:
            self._drafts[draft.key] = bubble = self._next_id()
            self.publish(self._bot_name, draft.text + DRAFTING, bubble)
        else:
            self.publish(self._bot_name, draft.text + DRAFTING, bubble, edit=True)

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        return inbound  # the panel sends text only

    async def show_commands(self, menu: CommandMenu) -> None:
        """No menu: /help lists them."""

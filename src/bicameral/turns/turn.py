"""A turn: one debounced batch of a chat's messages handed to whichever chamber answers it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bicameral.events import Action, ActionResult, Authority, Inbound, Role
from bicameral.sandbox.artifacts import SendLimits
from bicameral.store.memory_scopes import Reach, reach_for
from bicameral.tools.base import ToolContext

if TYPE_CHECKING:
    from bicameral.store import Stores


@dataclass
class Turn:
    chat: str
    turn_id: str
    batch: list[Inbound]
    # Performs an action for this turn; messages go through the outbox, tagged with the turn.
    perform: Callable[[Action], Awaitable[ActionResult]]
    # Messages that arrived since the turn started; calling it hands them to the turn.
    drain_injected: Callable[[], list[Inbound]]
    # The least role of everyone whose words are in the batch, and who they are (see events.Authority).
    authority: Authority = field(default_factory=lambda: Authority(Role.MEMBER))
    # The lane belongs to one person (a DM, or their own lane of a group), so their private memory may be used.
    personal: bool = False
    # The stored rows of the messages this turn answers so far (its batch, and what was handed in since).
    rows: Callable[[], list[int]] = list
    # Performs the turn's answer: recorded, it holds `rows`, so a restart before it is out delivers it rather than
    # answering them again. Unset: `perform`.
    answer: Callable[[Action], Awaitable[ActionResult]] | None = None

    async def send_answer(self, action: Action) -> ActionResult:
        return await (self.answer or self.perform)(action)

    @property
    def is_owner(self) -> bool:
        return self.authority.is_owner

    @property
    def reach(self) -> Reach:
        last = self.batch[-1]
        return reach_for(
            self.chat,
            channel=last.channel,
            sender_id=last.sender.id,
            private=last.is_private,
            own_lane=self.personal,
            owner=self.is_owner,
        )

    @property
    def reply_anchor(self) -> str | None:
        """In groups, quote the last message a person sent; in DMs, just talk.

        A synthetic message (a fired schedule) is no platform message, so there is nothing to quote: an answer
        to a scheduled task alone replies to nothing.
        """
        last = self.batch[-1]
        if last.is_private:
            return None
        return next((i.message_id for i in reversed(self.batch) if i.kind != "synthetic"), None)

    @property
    def thread_id(self) -> str | None:
        return self.batch[-1].thread_id

    def tool_context(self, stores: Stores, data_dir: Path, sending: SendLimits) -> ToolContext:
        """What the turn's tools may touch: this chat, this turn's delivery, the stores; files sent within `sending`."""
        return ToolContext(
            chat=self.chat,
            turn_id=self.turn_id,
            data_dir=data_dir,
            perform=self.perform,
            stores=stores,
            message_ids=tuple(i.message_id for i in self.batch),
            authority=self.authority,
            reach=self.reach,
            outgoing=sending.outgoing(),
            words="\n".join(i.text for i in self.batch if "forwarded" not in i.flags),
            tainted_by="a forwarded message" if any("forwarded" in i.flags for i in self.batch) else None,
        )


class TurnHandler(Protocol):
    """A chamber that answers turns: single mode, the two-chamber front, or the Claude Code worker."""

    async def start(self) -> None:
        """Acquire what the handler needs (processes, servers) before the first turn."""

    async def stop(self) -> None:
        """Release it; called once at shutdown."""

    async def handle(self, turn: Turn) -> None:
        """Answer the turn, delivering through `turn.perform`."""

    def reset(self, chat: str) -> None:
        """Forget the chat's conversation (the `/reset` command)."""

    async def interrupt(self, chat: str, by: Authority | None = None) -> bool:
        """Stop work the handler runs for the chat outside turns (`/stop`); True if anything stopped.

        `by` is a group member's own /stop: only work their words caused stops. None: everything (the owner, an admin).
        """


@runtime_checkable
class KeepsChats(Protocol):
    """A handler that keeps something of a chat between its turns (a live CLI process) that goes stale once another
    worker answers the chat; with several workers, told when this one stops holding it."""

    async def release(self, chat: str) -> None:
        """This worker no longer holds the chat: end what it keeps of it here; what is stored stays for the next turn."""

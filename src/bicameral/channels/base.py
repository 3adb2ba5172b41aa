"""The channel contract: translate a platform to Inbound values and perform Actions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bicameral.events import (
    TRUSTED_CHANNELS,
    Action,
    ActionResult,
    Capabilities,
    CommandMenu,
    Inbound,
    OwnerId,
    chat_key,
    owner_on,
    split_chat_key,
)


@dataclass(frozen=True)
class Cursor:
    """Where a channel's input stands on the platform (Matrix's sync token): kept with the batch it follows."""

    channel: str
    position: str


class InboundSink(Protocol):
    """Where a channel hands what came in (the gate)."""

    async def __call__(self, batch: Sequence[Inbound], cursor: Cursor | None = None) -> None:
        """Returns only after the batch is persisted: channels acknowledge the platform after it. A channel that
        asks the platform from a position of its own hands it along: it is stored in the same transaction."""

    def cursor(self, channel: str) -> str | None:
        """The position stored with the last batch of `channel`, or None before the first."""

# Called once when a channel can receive no more: with the reason when it failed for good (a revoked
# token, another poller), with None when its input simply ended (the terminal's EOF).
OnEnd = Callable[[str | None], None]


class Channel(Protocol):
    name: str
    capabilities: Capabilities

    async def start(self, sink: InboundSink, on_end: OnEnd) -> None:
        """Begin receiving; returns once the channel is ready (receiving runs in the background)."""

    async def stop(self) -> None:
        """Stop receiving and release connections."""

    async def perform(self, action: Action) -> ActionResult:
        """Carry out one action; never raises for platform errors, reports them in the result."""

    async def fetch_attachments(self, inbound: Inbound) -> Inbound:
        """Download the files `inbound` only refers to, once its sender was admitted; never raises.

        Downloading at intake would fetch files from anyone who can message the bot, so a
        channel hands over `attachment_refs` and the gate calls this after its access check.
        """

    async def show_commands(self, menu: CommandMenu) -> None:
        """Show each person the commands they may use, where the platform has a menu; never raises."""


@runtime_checkable
class SendsAlone(Protocol):
    """A channel that can send without receiving: a worker that runs turns while another one polls."""

    async def start_sending(self) -> None: ...


@runtime_checkable
class AnswersPresses(Protocol):
    """A channel that answers the presses of a batch the core left unanswered (Telegram's spinner)."""

    def answered_later(self, press_id: str) -> None:
        """The core answers this press itself, later (maybe from another worker): the channel must not."""


@runtime_checkable
class DirectRooms(Protocol):
    """A channel whose DMs are rooms of their own, not the person's id (Matrix): it knows which room is whose DM."""

    def is_direct_with(self, chat: str, user: str) -> bool:
        """Whether `chat` is the channel's DM with `user`."""


def own_chats(owner_id: OwnerId, channels: Sequence[Channel]) -> Callable[[str], bool]:
    """Whether a chat is the owner's own: a trusted local channel's, the chat their user id names (a Telegram DM), or
    on a channel whose DMs are rooms of their own, the room that is their DM."""

    def own(chat: str) -> bool:
        channel, _ = split_chat_key(chat)
        owner = owner_on(owner_id, channel)
        if channel in TRUSTED_CHANNELS or (owner is not None and chat == chat_key(channel, owner)):
            return True
        return owner is not None and any(
            c.name == channel and isinstance(c, DirectRooms) and c.is_direct_with(chat, owner) for c in channels
        )

    return own

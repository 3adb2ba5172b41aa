"""The channel contract: translate a platform to Inbound values and perform Actions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from bicameral.events import Action, ActionResult, Capabilities, Inbound

class ChannelStartError(Exception):
    """A channel cannot start (bad credentials, unreachable server); the message says what to fix."""


# A sink returns only after the batch is persisted: channels acknowledge the platform after it.
InboundSink = Callable[[Sequence[Inbound]], Awaitable[None]]


class Channel(Protocol):
    name: str
    capabilities: Capabilities

    async def start(self, sink: InboundSink) -> None:
        """Begin receiving; returns once the channel is ready (receiving runs in the background)."""

    async def stop(self) -> None:
        """Stop receiving and release connections."""

    async def perform(self, action: Action) -> ActionResult:
        """Carry out one action; never raises for platform errors, reports them in the result."""

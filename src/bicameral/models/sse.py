"""Server-sent events: the framing both completion APIs stream their replies in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerEvent:
    """One dispatched event: its name ("message" when unnamed) and its data lines joined."""

    event: str
    data: str


async def server_events(lines: AsyncIterator[str]) -> AsyncIterator[ServerEvent]:
    """The events framed by `lines` (without line endings), as the EventSource rules dispatch them.

    An event is dispatched by the blank line that ends it; one cut off before that line is
    dropped, so a truncated stream shows up as a reply that never finished.
    """
    name = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield ServerEvent(name or "message", "\n".join(data))
            name, data = "", []
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        # Comments (a line starting with ":"), `id` and `retry` carry nothing a completion needs.

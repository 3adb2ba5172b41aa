"""Server-sent events: the framing both completion APIs stream their replies in."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

_BREAK = re.compile(r"\r\n|\r|\n")


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


async def text_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The lines of UTF-8 `chunks` without their endings, split on CR LF, LF or CR as the EventSource rules split
    them; invalid bytes become U+FFFD, and a last unended line counts.

    Not str.splitlines (nor httpx's `aiter_lines`, which splits as it does): that also splits on U+2028,
    form feeds and other characters a JSON string may carry unescaped.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    after_cr = False  # the last text ended in CR: an LF that starts the next one belongs to it
    async for chunk in chunks:
        text = decoder.decode(chunk)
        if not text:
            continue
        if after_cr and text[0] == "\n":
            text = text[1:]
        after_cr = text.endswith("\r")
        parts = _BREAK.split(pending + text)
        pending = parts.pop()
        for line in parts:
            yield line
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending

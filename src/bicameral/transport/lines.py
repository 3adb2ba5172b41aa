"""A byte stream as text lines, split where the EventSource rules split them: CR LF, LF or CR."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator

_BREAK = re.compile(r"\r\n|\r|\n")


async def text_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The lines of UTF-8 `chunks` without their endings; invalid bytes become U+FFFD, a last unended line counts.

    Not str.splitlines: that also splits on U+2028, form feeds and other characters a JSON string
    may carry unescaped.
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

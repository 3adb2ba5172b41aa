"""One HTTP/1.1 connection over asyncio streams, and the answer read from it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from .errors import ProtocolError, Timeouts, TransportError, TransportTimeout
from .lines import text_lines
from .wire import BY_LENGTH, CHUNKED, NO_BODY, Framing, Head, chunk_size, framing, head_end, parse_head

_READ_SIZE = 65536
# An answer's status line and headers: checked after every read, so no head beyond this plus one
# read (96 KiB) is ever held.
_MAX_HEADERS = 32 * 1024
_MAX_LINE = 8 * 1024  # a chunk-size or trailer line


class Connection:
    """A connected socket that carries one request at a time and says whether it can carry another."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: str) -> None:
        self.origin = origin  # for error texts: scheme://host:port
        self.idle_since = 0.0
        self.heard = False  # any bytes of the current answer arrived
        self._reader = reader
        self._writer = writer
        self._buffer = bytearray()
        self._busy = False  # a request is out and its answer not yet read to the end
        self._keep_alive = True
        self._method = ""
        self._asked_to_close = False

    def reusable(self) -> bool:
        """Idle, open, and silent since its last answer: no EOF, and nothing unasked for (a 408 before a close)."""
        return (
            not self._busy
            and self._keep_alive
            and not self._buffer
            and not self._writer.is_closing()
            and not self._reader.at_eof()
            # StreamReader has no public way to ask whether bytes wait in its buffer.
            and not getattr(self._reader, "_buffer", b"")
        )

    def close(self) -> None:
        """Drop the socket; nothing to wait for, the transport closes in the background."""
        self._keep_alive = False
        self._writer.close()

    async def send(self, request: bytes, method: str, asked_to_close: bool, timeouts: Timeouts) -> None:
        """Write one encoded request, whole; `method` and `asked_to_close` decide how its answer is framed."""
        self._busy, self.heard, self._method, self._asked_to_close = True, False, method, asked_to_close
        self._writer.write(request)
        if self._writer.transport.get_write_buffer_size():
            try:
                async with asyncio.timeout(timeouts.write):
                    await self._writer.drain()
            except TimeoutError:
                raise TransportTimeout("write", f"{self.origin} did not take the request within {timeouts.write:g}s") from None
            except (ConnectionError, OSError) as err:
                raise TransportError(f"lost the connection to {self.origin} while sending: {err}") from None

    async def receive_head(self, timeouts: Timeouts) -> Head:
        """The status line and headers of the answer (informational 1xx answers skipped)."""
        while True:
            end = head_end(self._buffer)
            while end == -1:
                if len(self._buffer) > _MAX_HEADERS:
                    raise ProtocolError(f"{self.origin} sent more than {_MAX_HEADERS // 1024} KiB of headers")
                if not await self._fill(timeouts):
                    raise ProtocolError(f"{self.origin} closed the connection before the answer was complete")
                end = head_end(self._buffer)
            head = parse_head(bytes(self._buffer[:end]).rstrip(b"\r\n"))
            del self._buffer[:end]
            if head.status == 101:
                raise ProtocolError(f"{self.origin} switched protocols, which was not asked for")
            if head.status >= 200:
                return head

    async def receive_body(self, head: Head, timeouts: Timeouts) -> AsyncIterator[bytes]:
        """The body's chunks; afterwards the connection is ready for its next request, or closed."""
        frame = framing(head, self._method, self._asked_to_close)
        self._keep_alive = frame.keep_alive
        if frame.kind == CHUNKED:
            async for piece in self._chunked(timeouts):
                yield piece
        elif frame.kind != NO_BODY:
            async for piece in self._sized(frame, timeouts):
                yield piece
        self._busy = False
        if not self.reusable():
            self.close()

    async def _sized(self, frame: Framing, timeouts: Timeouts) -> AsyncIterator[bytes]:
        """A body of a declared length, or one that lasts until the server closes."""
        remaining = frame.length if frame.kind == BY_LENGTH else -1
        while remaining:
            if not self._buffer and not await self._fill(timeouts):
                if remaining > 0:
                    raise ProtocolError(f"{self.origin} closed the connection before the answer was complete")
                return
            piece = self._take(remaining if remaining > 0 else len(self._buffer))
            remaining -= len(piece) if remaining > 0 else 0
            yield piece

    async def _chunked(self, timeouts: Timeouts) -> AsyncIterator[bytes]:
        while size := chunk_size(await self._line(timeouts)):
            while size:
                if not self._buffer and not await self._fill(timeouts):
                    raise ProtocolError(f"{self.origin} closed the connection before the answer was complete")
                piece = self._take(size)
                size -= len(piece)
                yield piece
            if await self._line(timeouts):
                raise ProtocolError(f"{self.origin} sent a chunk longer than its size")
        while await self._line(timeouts):
            pass  # trailers carry nothing we use

    def _take(self, most: int) -> bytes:
        piece = bytes(self._buffer[:most])
        del self._buffer[:most]
        return piece

    async def _line(self, timeouts: Timeouts) -> bytes:
        """One line of chunked framing, without its ending."""
        while (end := self._buffer.find(b"\n")) == -1:
            if len(self._buffer) > _MAX_LINE:
                raise ProtocolError(f"{self.origin} sent an over-long line in a chunked body")
            if not await self._fill(timeouts):
                raise ProtocolError(f"{self.origin} closed the connection before the answer was complete")
        line = bytes(self._buffer[:end]).removesuffix(b"\r")
        del self._buffer[: end + 1]
        return line

    async def _fill(self, timeouts: Timeouts) -> bool:
        """Read more of the answer into the buffer; False when the server has closed."""
        try:
            async with asyncio.timeout(timeouts.read):
                data = await self._reader.read(_READ_SIZE)
        except TimeoutError:
            raise TransportTimeout("read", f"{self.origin} did not answer within {timeouts.read:g}s") from None
        except (ConnectionError, OSError) as err:
            raise ProtocolError(f"lost the connection to {self.origin} mid-answer: {err}") from None
        if not data:
            self._keep_alive = False
            return False
        self.heard = True
        self._buffer += data
        return True


class Response:
    """An answer's status and headers, and its body once read or while streamed."""

    def __init__(self, head: Head, body: AsyncIterator[bytes], on_close: Callable[[bool], None]) -> None:
        self.status: int = head.status
        self.headers: Mapping[str, str] = head.headers
        self._body = body
        self._on_close = on_close
        self._content: bytes | None = None
        self._closed = False

    async def read(self) -> bytes:
        """The whole body; reading it to the end frees the connection for another request."""
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.chunks()])
        return self._content

    def json(self) -> Any:
        """The body, read before, parsed as JSON; ValueError if it is not."""
        return json.loads(self._read_content())

    @property
    def text(self) -> str:
        """The body, read before, as text."""
        return self._read_content().decode("utf-8", "replace")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives."""
        finished = False
        try:
            async for chunk in self._body:
                yield chunk
            finished = True
        finally:
            self._finish(finished)

    def lines(self) -> AsyncIterator[str]:
        """The body as text lines without their endings."""
        return text_lines(self.chunks())

    async def aclose(self) -> None:
        """Stop reading; an unfinished body costs the connection, which cannot carry another request."""
        self._finish(False)

    def _finish(self, complete: bool) -> None:
        if not self._closed:
            self._closed = True
            self._on_close(complete)

    def _read_content(self) -> bytes:
        if self._content is None:
            raise RuntimeError("the body has not been read")
        return self._content


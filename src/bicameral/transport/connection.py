"""One HTTP/1.1 connection over asyncio streams, framed by h11, and the answer read from it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import h11

from .errors import ProtocolError, Timeouts, TransportError, TransportTimeout
from .lines import text_lines

_READ_SIZE = 65536
# An answer's status line and headers: h11 refuses an unfinished head past this, so with reads of
# _READ_SIZE no head beyond this plus one read (96 KiB) gets through, nor costs more memory.
_MAX_HEADERS = 32 * 1024


class Connection:
    """A connected socket that carries one request at a time and says whether it can carry another."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: str) -> None:
        self.origin = origin  # for error texts: scheme://host:port
        self.idle_since = 0.0
        self.heard = False  # any bytes of the current answer arrived
        self._reader = reader
        self._writer = writer
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEADERS)

    def reusable(self) -> bool:
        """Idle, open, and silent since its last answer: no EOF, and nothing unasked for (a 408 before a close)."""
        return (
            self._h11.our_state is h11.IDLE
            and self._h11.their_state is h11.IDLE
            and not self._writer.is_closing()
            and not self._reader.at_eof()
            # StreamReader has no public way to ask whether bytes wait in its buffer.
            and not getattr(self._reader, "_buffer", b"")
        )

    def close(self) -> None:
        """Drop the socket; nothing to wait for, the transport closes in the background."""
        self._writer.close()

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes, timeouts: Timeouts) -> None:
        """Write one request, whole."""
        try:
            data = self._h11.send(h11.Request(method=method, target=target, headers=headers))
            if body:
                data += self._h11.send(h11.Data(data=body))
            data += self._h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            # A header with a line break (a key pasted with its newline) must not reach the wire. h11's
            # message quotes the value, which may be a credential: it is not passed on.
            self.close()
            raise TransportError(
                f"cannot send this request to {self.origin}: a header holds a character HTTP forbids (a line break?)"
            ) from None
        self._writer.write(data)
        if self._writer.transport.get_write_buffer_size():
            try:
                async with asyncio.timeout(timeouts.write):
                    await self._writer.drain()
            except TimeoutError:
                raise TransportTimeout("write", f"{self.origin} did not take the request within {timeouts.write:g}s") from None
            except (ConnectionError, OSError) as err:
                raise TransportError(f"lost the connection to {self.origin} while sending: {err}") from None

    async def receive_head(self, timeouts: Timeouts) -> h11.Response:
        """The status line and headers of the answer (informational 1xx answers skipped)."""
        while True:
            event = await self._next_event(timeouts)
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise ProtocolError(f"{self.origin} sent {type(event).__name__} before an answer")

    async def receive_body(self, timeouts: Timeouts) -> AsyncIterator[bytes]:
        """The body's chunks; afterwards the connection is ready for its next request, or closed."""
        while True:
            event = await self._next_event(timeouts)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise ProtocolError(f"{self.origin} sent {type(event).__name__} inside a body")
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            self.heard = False
        else:
            self.close()  # either side asked to close (Connection: close, HTTP/1.0)

    async def _next_event(self, timeouts: Timeouts) -> Any:
        try:
            event = self._h11.next_event()
            while event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(timeouts.read):
                        data = await self._reader.read(_READ_SIZE)
                except TimeoutError:
                    raise TransportTimeout("read", f"{self.origin} did not answer within {timeouts.read:g}s") from None
                except (ConnectionError, OSError) as err:
                    raise ProtocolError(f"lost the connection to {self.origin} mid-answer: {err}") from None
                self.heard = self.heard or bool(data)
                self._h11.receive_data(data)  # b"": the server closed
                event = self._h11.next_event()
        except h11.RemoteProtocolError as err:
            raise ProtocolError(f"{self.origin} broke HTTP: {err}") from None
        if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
            raise ProtocolError(f"{self.origin} closed the connection before the answer was complete")
        return event


class Response:
    """An answer's status and headers, and its body once read or while streamed."""

    def __init__(self, head: h11.Response, body: AsyncIterator[bytes], on_close: Callable[[bool], None]) -> None:
        self.status: int = head.status_code
        self.headers: Mapping[str, str] = _headers(head.headers)
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


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1"), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers

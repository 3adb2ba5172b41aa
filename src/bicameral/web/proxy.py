"""`GuardedProxy`: a forward proxy on loopback for the browser; each request's host passes web_fetch's checks first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bicameral.web.address import AddressRefused
from bicameral.web.fetch import FetchFailed, Hop

log = logging.getLogger(__name__)

Check = Callable[[str], Awaitable[Hop]]
_MAX_HEAD = 64 * 1024
_MAX_REFUSALS = 50
# Hop-by-hop headers that concern the proxy, not the server.
_PROXY_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "keep-alive"})


class GuardedProxy:
    """The only way out for a browser context (Playwright's `proxy`, which also sends loopback through it).

    Chromium follows redirects, loads subresources, opens websockets and popups without asking Playwright's route
    handlers about redirects, so the check lives here, where every connection passes: a CONNECT (https, wss) or a
    plain http request is checked with `check` (web_fetch's `WebFetcher.check`: scheme, user@host, port, every
    address the name resolves to, the owner's allowances), and the connection then goes to the very address that was
    checked. So a name that resolves to a public address for the check and a private one a moment later (DNS
    rebinding) still reaches only the checked address. What Chromium does without a proxy (WebRTC's UDP, which the
    session turns off in the page) is outside this. A refused request gets a 403 (or a failed tunnel) and a line in
    `refused`, which the browser tools report.
    """

    def __init__(self, check: Check, *, connect_timeout: float = 10.0) -> None:
        self._check = check
        self._connect_timeout = connect_timeout
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        # Why each refused request was refused, newest last (bounded): the tools read and clear it.
        self.refused: list[str] = []
        self.url = ""

    async def start(self) -> str:
        """Listen on a free loopback port; the proxy URL to give the browser."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def aclose(self) -> None:
        """Stop listening and cut every open connection (a closed page's long polls and tunnels with it)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=5)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        target = ""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=self._connect_timeout)
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            if method.upper() == "CONNECT":
                up_reader, upstream = await self._open(_tunnel_url(target))
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                hop = await self._checked(target)
                up_reader, upstream = await self._connect(hop)
                upstream.write(_forwarded(method, hop, version, lines[1:]))
            await _pipe(reader, writer, up_reader, upstream)
        except (AddressRefused, FetchFailed) as exc:
            self._note(f"{target[:200]}: {exc}")
            await _answer(writer, 403, f"refused: {exc}")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            await _answer(writer, 400, "bad proxy request")
        except OSError as exc:
            await _answer(writer, 502, f"could not connect ({type(exc).__name__})")
        finally:
            self._writers.discard(writer)
            for side in (writer, upstream):
                if side is not None:
                    side.close()

    async def _open(self, url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self._connect(await self._checked(url))

    async def _checked(self, url: str) -> Hop:
        return await asyncio.wait_for(self._check(url), timeout=self._connect_timeout)

    async def _connect(self, hop: Hop) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        port = hop.url.port or (443 if hop.url.scheme == "https" else 80)
        try:
            return await asyncio.wait_for(asyncio.open_connection(str(hop.address), port), timeout=self._connect_timeout)
        except TimeoutError:
            raise OSError("connect timed out") from None

    def _note(self, line: str) -> None:
        log.info("browser proxy refused %s", line)
        self.refused.append(line)
        del self.refused[:-_MAX_REFUSALS]


def _tunnel_url(authority: str) -> str:
    """A CONNECT target (`host:port`, `[v6]:port`) as the https URL the checks take."""
    host, _, port = authority.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(authority)
    return f"https://{host}:{port}/"


def _forwarded(method: str, hop: Hop, version: str, header_lines: list[str]) -> bytes:
    """The request as the server should get it: origin-form target, no proxy headers, one request per connection."""
    upgrade = any(line.lower().startswith("upgrade:") for line in header_lines)
    kept = [
        line
        for line in header_lines
        if line and line.split(":", 1)[0].strip().lower() not in _PROXY_HEADERS
        # A websocket needs its `Connection: Upgrade`; anything else is closed after one answer, so a reused
        # connection can never carry a second request to a host that was not checked.
        and (upgrade or line.split(":", 1)[0].strip().lower() != "connection")
    ]
    if not upgrade:
        kept.append("Connection: close")
    path = hop.url.raw_path.decode("ascii") or "/"
    return f"{method} {path} {version}\r\n".encode("latin-1") + "".join(f"{line}\r\n" for line in kept).encode(
        "latin-1"
    ) + b"\r\n"


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up_reader: asyncio.StreamReader, upstream: asyncio.StreamWriter
) -> None:
    """Copy both ways until the server is done (its answer sent, or the tunnel closed), then stop the other way too."""
    to_server = asyncio.ensure_future(_copy(reader, upstream))
    try:
        await _copy(up_reader, writer)
    finally:
        to_server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await to_server


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except (OSError, RuntimeError):
        sink.close()


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    body = text.encode("utf-8", errors="replace")
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
    with contextlib.suppress(OSError, RuntimeError):
        writer.write(head.encode("latin-1") + b"Connection: close\r\n\r\n" + body)
        await writer.drain()

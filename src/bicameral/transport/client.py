"""An HTTP/1.1 client for the fixed services of every message: kept-alive connections, no per-request ceremony.

httpx spends about 1 ms of CPU per request on its models, hooks and pool bookkeeping; a message
makes three requests (getUpdates, the model, sendMessage). This client does what those calls need
and no more: keep-alive pools per origin, TLS, timeouts, HTTP proxies, one retry of a stale connection.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from .connection import Connection, Response
from .errors import ConnectError, Timeouts, TransportError, TransportTimeout
from .proxies import Proxies, ProxyRoute
from .wire import encode_request

_USER_AGENT = "bicameral"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """host:port, an IPv6 address in brackets."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def authority(self) -> str:
        """The Host header: the port only when it is not the scheme's own."""
        if self.port != (443 if self.scheme == "https" else 80):
            return self.address
        return f"[{self.host}]" if ":" in self.host else self.host


class HttpClient:
    """Sends requests over pooled keep-alive connections; one instance per service is plenty."""

    def __init__(
        self,
        *,
        timeouts: Timeouts = Timeouts(),  # noqa: B008 - a frozen value
        ssl_context: ssl.SSLContext | None = None,
        idle_per_origin: int = 32,
        idle_expiry: float = 30.0,
        proxies: Proxies | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._timeouts = timeouts
        self._ssl = ssl_context
        self._idle_per_origin = idle_per_origin
        self._idle_expiry = idle_expiry
        self._proxies = proxies if proxies is not None else Proxies.none()
        self._clock = clock
        self._idle: dict[str, list[Connection]] = {}

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        timeouts: Timeouts | None = None,
    ) -> Response:
        """Send a request and read its whole answer."""
        async with self.stream(method, url, headers=headers, body=body, timeouts=timeouts) as response:
            await response.read()
        return response

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        timeouts: Timeouts | None = None,
    ) -> AsyncIterator[Response]:
        """Send a request; the answer's body is read inside the block, and closed when it is left."""
        response = await self.send(method, url, headers=headers, body=body, timeouts=timeouts)
        try:
            yield response
        finally:
            await response.aclose()

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        timeouts: Timeouts | None = None,
    ) -> Response:
        """Send a request and return its answer with the body unread; the caller must `aclose()` it."""
        target = _target(url)
        timeouts = timeouts or self._timeouts
        route = self._proxies.for_url(target.scheme, target.host, target.port)
        forward = route is not None and target.scheme == "http"  # plain http goes to the proxy in absolute form
        key = f"{target.origin} via {route.host}:{route.port}" if route else target.origin
        request_target = f"{target.scheme}://{target.authority}{target.path}" if forward else target.path
        request_headers = _request_headers(target, headers or {}, body, method, route if forward else None)
        try:
            request = encode_request(method, request_target, request_headers, body)
        except TransportError as err:
            raise TransportError(f"cannot send this request to {target.origin}: {err}") from None
        closing = any(name.lower() == "connection" and "close" in value.lower() for name, value in request_headers)
        reused = self._idle_connection(key)
        connection = reused or await self._connect(target, route, timeouts)
        while True:
            try:
                await connection.send(request, method, closing, timeouts)
                head = await connection.receive_head(timeouts)
            except TransportTimeout:
                connection.close()
                raise
            except TransportError:
                connection.close()
                # The server closed a kept-alive connection as the request went out: it never saw it,
                # so a new connection may carry it. A new one that fails has failed for real.
                if connection is not reused or connection.heard:
                    raise
            except BaseException:
                connection.close()  # cancelled half-way: nobody knows what the server has seen
                raise
            else:
                if head.status != 408 or connection is not reused:
                    break
                # A 408 on a kept-alive connection: the server gave it up as idle before our request came.
                connection.close()
            reused = None
            connection = await self._connect(target, route, timeouts)
        carrier = connection
        return Response(head, carrier.receive_body(head, timeouts), lambda complete: self._release(key, carrier, complete))

    def idle_connections(self) -> int:
        """Idle kept-alive connections held, over all origins."""
        return sum(len(idle) for idle in self._idle.values())

    async def aclose(self) -> None:
        """Close the idle connections; the client can still be used, and will connect again."""
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # --- private ---

    def _idle_connection(self, key: str) -> Connection | None:
        idle = self._idle.get(key)
        deadline = self._clock() - self._idle_expiry
        while idle:
            connection = idle.pop()  # the most recent: the likeliest to be alive and warm
            if connection.idle_since >= deadline and connection.reusable():
                return connection
            connection.close()
        return None

    def _release(self, key: str, connection: Connection, complete: bool) -> None:
        if not complete or not connection.reusable():
            connection.close()
            return
        connection.idle_since = self._clock()
        idle = self._idle.setdefault(key, [])
        idle.append(connection)
        if len(idle) > self._idle_per_origin:
            idle.pop(0).close()

    async def _connect(self, target: _Target, route: ProxyRoute | None, timeouts: Timeouts) -> Connection:
        tls = self._context() if target.scheme == "https" else None
        host, port = (route.host, route.port) if route else (target.host, target.port)
        where = f"{route.host}:{route.port} (proxy for {target.host})" if route else target.address
        try:
            async with asyncio.timeout(timeouts.connect):
                if route is None:
                    server_name = target.host if tls else None
                    reader, writer = await asyncio.open_connection(host, port, ssl=tls, server_hostname=server_name)
                else:
                    reader, writer = await asyncio.open_connection(host, port)
                    try:
                        if tls is not None:
                            await _tunnel(reader, writer, target, route)
                            await writer.start_tls(tls, server_hostname=target.host)
                    except BaseException:
                        writer.close()
                        raise
        except TimeoutError:
            raise TransportTimeout("connect", f"could not connect to {where} within {timeouts.connect:g}s") from None
        except ssl.SSLCertVerificationError as err:
            raise ConnectError(f"the TLS certificate of {target.host} did not check out: {err.verify_message}") from None
        except (OSError, ssl.SSLError, UnicodeError) as err:
            # UnicodeError: a name the IDNA codec refuses (an empty or over-long label) before any lookup.
            raise ConnectError(f"could not connect to {where}: {err}") from None
        return Connection(reader, writer, target.origin)

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            from .tls import service_context

            self._ssl = service_context()
        return self._ssl


async def _tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: _Target, route: ProxyRoute) -> None:
    """Ask an HTTP proxy for a tunnel to the target; ConnectError unless it agrees."""
    authority = target.address
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if route.authorization:
        lines.append(f"Proxy-Authorization: {route.authorization}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    try:
        answer = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise ConnectError(f"the proxy {route.host}:{route.port} sent an oversized answer to CONNECT") from None
    except asyncio.IncompleteReadError:
        raise ConnectError(f"the proxy {route.host}:{route.port} closed the connection instead of opening a tunnel") from None
    status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ConnectError(f"the proxy {route.host}:{route.port} answered CONNECT with {status_line[:80]!r}")
    if not 200 <= int(parts[1]) < 300:
        raise ConnectError(f"the proxy {route.host}:{route.port} refused the tunnel to {authority} ({status_line[9:80]})")


def _request_headers(
    target: _Target, headers: Mapping[str, str], body: bytes, method: str, proxy: ProxyRoute | None
) -> list[tuple[str, str]]:
    given = {name.lower() for name in headers}
    out = [("host", target.authority)] if "host" not in given else []
    if "user-agent" not in given:
        out.append(("user-agent", _USER_AGENT))
    if (body or method in _BODY_METHODS) and "content-length" not in given:
        out.append(("content-length", str(len(body))))
    if proxy is not None and proxy.authorization:
        out.append(("proxy-authorization", proxy.authorization))
    out.extend(headers.items())
    return out


@lru_cache(maxsize=256)
def _target(url: str) -> _Target:
    """The parts of an absolute http(s) URL; the same few URLs come back on every message.

    Errors never quote the URL: a Bot API URL carries the token.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise TransportError(f"not an http(s) URL with a host (scheme {scheme[:20]!r})")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise TransportError(f"a URL for {parts.hostname[:100]} with a port out of range") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(scheme, parts.hostname, port, path)


"""The httpx set-up every call to a fixed service shares: the Bot API's and the model APIs'.

Requests go direct or through the proxy `Proxies` picks for their URL (http://, socks5://, socks5h://),
over httpx's own connection pools with the one TLS context, HTTP/2 where asked for and the server offers it
(ALPN): over TLS, 16 calls in flight cost 1.0-1.4 ms of CPU each on one HTTP/2 connection against 1.9-2.0 ms
on HTTP/1.1 connections (handshakes included), a lone call 0.5 ms more.
httpcore scans its whole pool whenever a request starts or ends, and for each idle connection counts
them all again and asks the kernel whether it is still open: a pool of n connections costs O(n²) per
request. With 200 chats waiting on a model, pools of 32 spent 2 s of CPU a burst on those scans (measured);
so a route holds many pools of 4, filled in order: each scan stays short, and a lone chat still reuses
one warm connection.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from functools import lru_cache
from typing import Any

import httpx

from .proxies import Proxies, ProxyRoute
from .tls import service_context

# An idle connection is kept this long: a provider's TLS handshake is worth saving between messages,
# and httpcore drops one the server has closed before reusing it.
KEEPALIVE_SECONDS = 30.0
POOL_SIZE = 4  # connections per pool (a 200-chat burst: 0.2 s of pool scans instead of 2 s with 32)
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Plain http never speaks TLS (no https:// proxies either): its pools get a context that trusts nothing,
# and the CA bundle (about 1 MB) is loaded only when an https request is made.
_NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class ServiceTransport(httpx.AsyncBaseTransport):
    """An httpx transport that routes each request by `Proxies` and spreads requests over small pools."""

    def __init__(
        self,
        proxies: Proxies,
        *,
        connections: int = 32,
        pool_size: int = POOL_SIZE,
        http2: bool = True,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        """`connections` kept alive per route and scheme, in pools of `pool_size`; `verify` trusts the system's CAs
        unless given."""
        self._proxies = proxies
        self._pool_size = pool_size
        self._pools = max(1, -(-connections // pool_size))
        self._http2 = http2
        self._verify = verify
        self._routes: dict[tuple[ProxyRoute | None, bool], _Pools] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        route = self._proxies.for_url(url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme, 0))
        key = (route, url.scheme == "https")
        pools = self._routes.get(key)
        if pools is None:
            pools = self._routes[key] = _Pools(lambda: self._transport(*key), self._pools, self._pool_size)
        return await pools.send(request)

    async def request(
        self,
        method: str,
        url: str,
        *,
        timeout: httpx.Timeout,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        data: dict[str, Any] | None = None,
        files: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """Send one request and return its answer with the body unread (`aread`, `aiter_bytes`); `aclose` it after.

        httpx's transport API, without its client: these calls need no redirects, cookies, auth flows or hooks,
        which were a quarter of the CPU of a call (measured).
        """
        limits = {"timeout": timeout.as_dict()}
        request = httpx.Request(method, _parsed(url), headers=headers, content=content, data=data, files=files, extensions=limits)
        return await self.handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool; the transport can still be used, and opens new ones."""
        routes, self._routes = self._routes, {}
        for pools in routes.values():
            await pools.aclose()

    def in_flight(self) -> dict[tuple[ProxyRoute | None, bool], list[int]]:
        """Requests under way per route (and whether over TLS) and pool, in fill order."""
        return {key: pools.in_flight() for key, pools in self._routes.items()}

    def _transport(self, route: ProxyRoute | None, tls: bool) -> httpx.AsyncHTTPTransport:
        proxy = None if route is None else httpx.Proxy(route.url, auth=route.auth)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=self._pool_size, keepalive_expiry=KEEPALIVE_SECONDS)
        verify = (self._verify or service_context()) if tls else _NO_TLS
        return httpx.AsyncHTTPTransport(verify=verify, http2=self._http2, limits=limits, proxy=proxy)


class _Pools:
    """Lends one of `count` transports per request: the first with room, else the least busy."""

    def __init__(self, build: Callable[[], httpx.AsyncHTTPTransport], count: int, per_pool: int) -> None:
        self._build = build
        self._per_pool = per_pool
        self._transports: list[httpx.AsyncHTTPTransport | None] = [None] * count
        self._in_flight = [0] * count

    async def send(self, request: httpx.Request) -> httpx.Response:
        index = self._pick()
        transport = self._transports[index]
        if transport is None:
            transport = self._transports[index] = self._build()
        self._in_flight[index] += 1
        try:
            response = await transport.handle_async_request(request)
        except BaseException:
            self._in_flight[index] -= 1
            raise
        # The request holds its pool until its answer is closed, read to the end or not.
        response.stream = _Released(response.stream, lambda: self._release(index))
        return response

    def in_flight(self) -> list[int]:
        return list(self._in_flight)

    async def aclose(self) -> None:
        transports, self._transports = self._transports, [None] * len(self._transports)
        for transport in transports:
            if transport is not None:
                await transport.aclose()

    def _pick(self) -> int:
        for index, busy in enumerate(self._in_flight):
            if busy < self._per_pool:
                return index
        return min(range(len(self._in_flight)), key=self._in_flight.__getitem__)

    def _release(self, index: int) -> None:
        self._in_flight[index] -= 1


class _Released(httpx.AsyncByteStream):
    """An answer's body that calls `release` once, when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream | httpx.SyncByteStream, release: Callable[[], None]) -> None:
        assert isinstance(stream, httpx.AsyncByteStream)  # an async transport answers with async streams
        self._stream = stream
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


@lru_cache(maxsize=256)
def _parsed(url: str) -> httpx.URL:
    """A URL parsed once: the same few come back on every message (a Bot API method, a completion endpoint)."""
    return httpx.URL(url)

"""Fetch one URL over http(s), checking every hop's address and connecting only to the address it checked."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, ip_address
from urllib.parse import urlsplit

import httpx

from bicameral.web.address import AddressPolicy, AddressRefused, IPAddress, literal_address
from bicameral.web.decoding import BodyDecoder, TooLarge, Undecodable

Resolve = Callable[[str, int], Awaitable[list[IPAddress]]]
_MAX_URL_CHARS = 2048
_AUTHORITY_END = re.compile(r"[/?#]")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class FetchFailed(Exception):
    """The page could not be fetched (timeout, HTTP error, too big); the message says so in a sentence."""


class _Redirected(Exception):
    """A redirect answer, taken from httpx before it parses the Location itself (which it does even when not following)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


async def _take_redirect(response: httpx.Response) -> None:
    """httpx's response hook: hand every redirect to our own checks; httpx would raise on a data: or jar: Location."""
    if response.status_code in _REDIRECTS:
        raise _Redirected(response.headers.get("location", ""))


async def system_resolve(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives for the name."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ip_address(info[4][0]) for info in infos]


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int = 2_000_000
    timeout_seconds: float = 20.0
    max_redirects: int = 5


@dataclass(frozen=True)
class Page:
    url: str
    content_type: str
    charset: str | None
    body: bytes


@dataclass(frozen=True)
class Hop:
    """One checked request: the URL as asked, and the address it must go to."""

    url: httpx.URL
    address: IPAddress
    by_name: bool


@dataclass
class WebFetcher:
    """Fetches public pages; the resolver and the address policy are injectable so tests can point names anywhere."""

    limits: FetchLimits = field(default_factory=FetchLimits)
    policy: AddressPolicy = field(default_factory=AddressPolicy)
    resolve: Resolve = system_resolve
    # The certificate authorities to trust; None: the system's (tests pass one that trusts their own).
    tls: ssl.SSLContext | None = None
    _system_tls: ssl.SSLContext | None = field(default=None, init=False, repr=False)

    async def fetch(self, url: str) -> Page:
        """The final page after at most `max_redirects` checked redirects; AddressRefused or FetchFailed otherwise."""
        try:
            async with asyncio.timeout(self.limits.timeout_seconds):
                return await self._follow(url)
        except TimeoutError:
            raise FetchFailed(f"{url} did not finish within {self.limits.timeout_seconds:g}s; gave up") from None

    async def _follow(self, url: str) -> Page:
        # trust_env=False: a proxy from the environment would resolve names itself, past our checks.
        timeout = httpx.Timeout(self.limits.timeout_seconds)
        verify = await self._verify()
        hooks = {"response": [_take_redirect]}
        async with httpx.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=timeout, verify=verify, event_hooks=hooks
        ) as client:
            current = url
            for _ in range(self.limits.max_redirects + 1):
                try:
                    hop = await self.check(current)
                except AddressRefused as exc:
                    if current == url:
                        raise
                    raise AddressRefused(f"it redirected to {current[:300]}, and {exc}") from None
                page, location = await self._get(client, hop)
                if page is not None:
                    return page
                current = _redirect_target(hop.url, location)
        raise FetchFailed(f"{url} redirected more than {self.limits.max_redirects} times; gave up")

    async def _verify(self) -> ssl.SSLContext:
        """The TLS context: the given one, else httpx's default built once (loading the CA bundle takes ~50 ms)."""
        if self.tls is not None:
            return self.tls
        if self._system_tls is None:
            # Off the event loop: other chats keep moving while the bundle loads.
            self._system_tls = await asyncio.to_thread(httpx.create_ssl_context, trust_env=False)
        return self._system_tls

    async def check(self, url: str) -> Hop:
        """Parse and check one URL and resolve its host once; AddressRefused names the reason."""
        if len(url) > _MAX_URL_CHARS:
            raise AddressRefused(f"the URL is longer than {_MAX_URL_CHARS} characters")
        if any(ord(c) < 33 or c in "\\\x7f" for c in url):
            raise AddressRefused("the URL contains spaces, control characters or backslashes")
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            self._refuse_numeric_spelling(url)
            raise AddressRefused(f"{url!r} is not a valid URL ({exc})") from None
        if parsed.scheme not in ("http", "https"):
            raise AddressRefused(f"only http and https URLs are fetched, not {parsed.scheme or 'a URL without a scheme'}")
        if parsed.userinfo or "@" in _AUTHORITY_END.split(url.split("//", 1)[-1], 1)[0]:
            raise AddressRefused("URLs with a user name or password (user@host) are refused")
        host = parsed.host.rstrip(".")
        if not host:
            raise AddressRefused(f"{url!r} has no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if port > 65535:
            # httpx parses any number; the socket would refuse it with an OverflowError, not a sentence.
            raise AddressRefused(f"port {port} does not exist (ports go up to 65535)")
        why_port = self.policy.port_refusal(port)
        if why_port:
            raise AddressRefused(why_port)
        literal = literal_address(host)
        if literal is not None:
            addresses: list[IPAddress] = [literal]
        else:
            try:
                addresses = await self.resolve(host, port)
            except (OSError, ValueError):
                raise FetchFailed(f"could not resolve {host}") from None
            if not addresses:
                raise FetchFailed(f"could not resolve {host}")
        for address in addresses:
            why = self.policy.refusal(address, host if literal is None else None)
            if why:
                raise AddressRefused(_refusal(host, literal, why))
        return Hop(url=parsed, address=addresses[0], by_name=literal is None)

    def _refuse_numeric_spelling(self, url: str) -> None:
        """Name the address behind a numeric host httpx will not parse (0177.0.0.1), so the refusal says what it is."""
        try:
            host = (urlsplit(url).hostname or "").rstrip(".")
        except ValueError:
            return
        address = literal_address(host)
        why = self.policy.refusal(address) if address is not None else None
        if why:
            raise AddressRefused(_refusal(host, address, why))

    async def _get(self, client: httpx.AsyncClient, hop: Hop) -> tuple[Page | None, str]:
        """Request the pinned address; the page, or None and where a redirect points."""
        pinned = hop.url.copy_with(host=str(hop.address))
        headers = {"Host": hop.url.netloc.decode("ascii"), "Accept-Encoding": "gzip, deflate"}
        # The certificate is checked against the name (SNI); the socket goes to the checked address.
        extensions = {"sni_hostname": hop.url.host} if hop.by_name else {}
        shown = str(hop.url)
        try:
            async with client.stream("GET", pinned, headers=headers, extensions=extensions) as response:
                if response.status_code >= 400:
                    raise FetchFailed(f"{shown} answered HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.limits.max_bytes:
                    raise FetchFailed(self._too_big(shown))
                body = await self._body(response, shown)
                content_type = response.headers.get("content-type", "")
                return Page(shown, content_type.split(";")[0].strip().lower(), response.charset_encoding, body), ""
        except _Redirected as redirect:
            if not redirect.location:
                raise FetchFailed(f"{shown} redirected without saying where") from None
            return None, redirect.location
        except httpx.TimeoutException:
            raise FetchFailed(f"{shown} did not answer within {self.limits.timeout_seconds:g}s") from None
        except httpx.HTTPError as exc:
            raise FetchFailed(f"could not fetch {shown} ({type(exc).__name__})") from None

    async def _body(self, response: httpx.Response, shown: str) -> bytes:
        """The body as sent, decoded layer by layer here; the limit holds for the bytes received and for every layer."""
        limit = self.limits.max_bytes
        try:
            decoder = BodyDecoder(response.headers.get("content-encoding", ""), limit)
        except Undecodable as exc:
            raise FetchFailed(f"{shown} {exc}") from None
        received = 0
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                received += len(chunk)
                if received > limit:
                    raise FetchFailed(self._too_big(shown))
                self._keep(body, decoder.feed(chunk), shown)
            self._keep(body, decoder.finish(), shown)
        except TooLarge:
            raise FetchFailed(f"{shown} is larger than the {limit:,}-byte limit once decompressed; not fetched") from None
        except Undecodable as exc:
            raise FetchFailed(f"{shown} {exc}") from None
        return bytes(body)

    def _keep(self, body: bytearray, pieces: Iterator[bytes], shown: str) -> None:
        """Append decoded pieces, refusing the page the moment it passes the limit."""
        for piece in pieces:
            body += piece
            if len(body) > self.limits.max_bytes:
                raise FetchFailed(self._too_big(shown))

    def _too_big(self, url: str) -> str:
        return f"{url} is larger than the {self.limits.max_bytes:,}-byte limit; not fetched"


def _redirect_target(base: httpx.URL, location: str) -> str:
    """Where a redirect leads, as an absolute URL; a scheme other than http(s), or a malformed Location, refused by name."""
    malformed = FetchFailed(f"{base} redirected to a malformed address ({location[:100]!r}); not followed")
    try:
        scheme = urlsplit(location).scheme.lower()
    except ValueError:
        raise malformed from None
    if scheme and scheme not in ("http", "https"):
        # Named by its scheme only: a data: or javascript: URL is content, not an address worth repeating.
        raise AddressRefused(
            f"it redirected to a {scheme[:20]}: URL, which web_fetch does not follow (only http and https URLs are fetched)"
        )
    try:
        return str(base.join(location))
    except httpx.InvalidURL:
        raise malformed from None


def _refusal(host: str, literal: IPAddress | None, why: str) -> str:
    """One sentence: what the host means, why that is refused."""
    if literal is None:
        said = f"{host} points to a refused address: {why}"
    elif isinstance(literal, IPv4Address) and host != str(literal):
        said = f"{host} means {literal}, and {why}"
    else:
        said = why
    return f"{said}; only public addresses and the owner's allowed hosts are reached"

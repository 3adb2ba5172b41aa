"""The browser's guarded proxy on its own, spoken to over raw sockets: tunnels and plain requests reach only what
web_fetch's checks allow, and each goes to the address that was checked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from ipaddress import ip_network

import pytest

from bicameral.web.address import AddressPolicy
from bicameral.web.fetch import WebFetcher
from bicameral.web.proxy import GuardedProxy
from tests.web.conftest import Resolver, Site, serve_site

ALLOW_ONE = AddressPolicy(allowed=(ip_network("127.0.0.1/32"),))


@pytest.fixture
def other_site() -> Iterator[Site]:
    yield from serve_site("127.0.0.2")


@pytest.fixture
async def proxy() -> AsyncIterator[GuardedProxy]:
    resolver = Resolver({"site.test": [["127.0.0.1"]], "rebind.test": [["127.0.0.1"], ["127.0.0.2"]]})
    guarded = GuardedProxy(WebFetcher(policy=ALLOW_ONE, resolve=resolver).check)
    await guarded.start()
    yield guarded
    await guarded.aclose()


async def _exchange(proxy: GuardedProxy, *messages: bytes) -> bytes:
    """Send each message in turn on one connection to the proxy (reading the answer to a CONNECT first); all it said."""
    host, port = proxy.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    heard = b""
    for message in messages:
        writer.write(message)
        await writer.drain()
        if message.startswith(b"CONNECT"):
            heard += await reader.readuntil(b"\r\n\r\n")
            if b" 200 " not in heard:
                break
    heard += await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    return heard


async def test_a_plain_request_reaches_an_allowed_host_once(proxy, site):
    url = site.url("/notes.txt")
    request = f"GET {url} HTTP/1.1\r\nHost: site.test:{site.port}\r\nProxy-Connection: keep-alive\r\n\r\n"
    answer = await _exchange(proxy, request.encode())
    assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200"), answer[:100]
    assert b"the meeting moved to Thursday" in answer
    assert site.seen == [("/notes.txt", f"site.test:{site.port}")]


async def test_a_tunnel_reaches_an_allowed_host_and_a_private_one_is_refused(proxy, site, other_site):
    inner = f"GET /notes.txt HTTP/1.1\r\nHost: 127.0.0.1:{site.port}\r\nConnection: close\r\n\r\n".encode()
    answer = await _exchange(proxy, f"CONNECT 127.0.0.1:{site.port} HTTP/1.1\r\n\r\n".encode(), inner)
    assert answer.startswith(b"HTTP/1.1 200 Connection Established") and b"the meeting moved to Thursday" in answer
    refused = await _exchange(proxy, f"CONNECT 127.0.0.2:{other_site.port} HTTP/1.1\r\n\r\n".encode(), inner)
    assert refused.startswith(b"HTTP/1.1 403") and b"loopback" in refused
    plain = await _exchange(proxy, f"GET {other_site.url('/notes.txt', host='127.0.0.2')} HTTP/1.1\r\n\r\n".encode())
    assert plain.startswith(b"HTTP/1.1 403")
    assert other_site.seen == []
    assert len(proxy.refused) == 2 and all("127.0.0.2 is a loopback address" in line for line in proxy.refused)


async def test_a_name_is_connected_to_the_address_it_was_checked_at(proxy, site, other_site):
    # rebind.test answers 127.0.0.1 (allowed) for the check; a second lookup would say 127.0.0.2, but there is none.
    answer = await _exchange(proxy, f"GET http://rebind.test:{site.port}/notes.txt HTTP/1.1\r\n\r\n".encode())
    assert b"the meeting moved to Thursday" in answer
    assert other_site.seen == []


async def test_garbage_is_answered_400_and_nothing_is_reached(proxy, site):
    for garbage in (b"HELLO\r\n\r\n", b"CONNECT nowhere HTTP/1.1\r\n\r\n", b"GET /relative HTTP/1.1\r\n\r\n"):
        answer = await _exchange(proxy, garbage)
        assert answer.startswith(b"HTTP/1.1 400") or answer.startswith(b"HTTP/1.1 403"), (garbage, answer[:80])
    assert site.seen == []

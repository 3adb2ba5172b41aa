"""The httpx set-up of the fixed services (bicameral.net) against real sockets: pools, proxies of both kinds, TLS.

The servers are raw asyncio ones on 127.0.0.1 that count connections and requests; the SOCKS5 proxy is the
small one of tests/support/socks.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bicameral.net import Proxies
from bicameral.net.client import ServiceTransport
from tests.support.certificates import self_signed
from tests.support.socks import Socks5Proxy

# Generous limits: a stuck client fails as a timeout, not by hanging the suite; tests never wait on them.
PATIENT = httpx.Timeout(10.0)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


# The test servers


@dataclass
class Request:
    """One request as the server read it off the wire; header names lower-case, in arrival order."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    connection: int

    def header(self, name: str) -> str | None:
        values = [value for key, value in self.headers if key == name]
        assert len(values) <= 1, f"{name} sent {len(values)} times"
        return values[0] if values else None

    @property
    def names(self) -> set[str]:
        return {key for key, _ in self.headers}


Handler = Callable[["Peer"], Awaitable[None]]


@dataclass
class Peer:
    """One accepted connection, as a handler drives it."""

    server: Server
    index: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def request(self) -> Request | None:
        """The next request on this connection, or None when the client closed it."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.server.note_disconnect()
            return None
        start, *lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, _ = start.split(" ", 2)
        headers = [(name.strip().lower(), value.strip()) for name, _, value in (line.partition(":") for line in lines)]
        fields = dict(headers)
        if fields.get("transfer-encoding", "").lower() == "chunked":
            body = await self._chunked_body()
        else:
            body = await self.reader.readexactly(int(fields.get("content-length", "0")))
        request = Request(method, target, headers, body, self.index)
        await self.server.note_request(request)
        return request

    async def _chunked_body(self) -> bytes:
        body = b""
        while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await self.reader.readexactly(size + 2))[:-2]
        while await self.reader.readuntil(b"\r\n") != b"\r\n":
            pass
        return body

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def trickle(self, data: bytes) -> None:
        """Send one byte at a time, giving the client a turn to read each one on its own."""
        for index in range(len(data)):
            await self.send(data[index : index + 1])
            await asyncio.sleep(0)

    async def until_client_closes(self) -> None:
        """Wait for the client to close this connection, discarding whatever it sends."""
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(65536):
                pass
        await self.server.note_disconnect()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()
        await self.server.note_server_close()


@dataclass
class Server:
    """An asyncio server on 127.0.0.1 that runs `handler` per connection and counts what happens."""

    handler: Handler
    port: int = 0
    accepted: int = 0
    disconnects: int = 0
    server_closes: int = 0
    requests: list[Request] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self, tls: ssl.SSLContext | None = None) -> Server:
        if tls is not None:
            tls.sni_callback = lambda _socket, name, _context: self.server_names.append(name)  # type: ignore[assignment]
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url(self, path: str = "/", *, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        index = self.accepted
        self.accepted += 1
        await self._notify()
        # The handler runs in a task of its own: cancelling asyncio's connection task logs an error on 3.11.
        handler = asyncio.create_task(self.handler(Peer(self, index, reader, writer)))
        self._tasks.add(handler)
        try:
            await handler
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.CancelledError):
            pass  # the client went away mid-answer (as several tests make it), or the server stopped
        except Exception as failure:  # a broken handler fails the test at teardown
            self.failures.append(failure)
        finally:
            writer.close()
            self._tasks.discard(handler)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def note_request(self, request: Request) -> None:
        self.requests.append(request)
        await self._notify()

    async def note_disconnect(self) -> None:
        self.disconnects += 1
        await self._notify()

    async def note_server_close(self) -> None:
        self.server_closes += 1
        await self._notify()

    async def until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until `condition()` holds; it is checked whenever a connection, request or close is counted."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(condition)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()


Serve = Callable[..., Awaitable[Server]]


@dataclass
class Client:
    """A ServiceTransport with patient limits, and answers read whole."""

    transport: ServiceTransport

    async def send(self, method: str, url: str, content: bytes | None = None) -> httpx.Response:
        response = await self.transport.request(method, url, timeout=PATIENT, content=content)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def get(self, url: str) -> httpx.Response:
        return await self.send("GET", url)

    async def post(self, url: str, content: bytes) -> httpx.Response:
        return await self.send("POST", url, content)


MakeClient = Callable[..., Client]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a test server with a handler (and optionally TLS); stopped, and its handler failures raised, at teardown."""
    servers: list[Server] = []

    async def start(handler: Handler, *, tls: ssl.SSLContext | None = None) -> Server:
        server = await Server(handler).start(tls)
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()
    for server in servers:
        assert server.failures == [], server.failures


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    """Service transports with no proxy unless told otherwise; closed at teardown."""
    clients: list[Client] = []

    def make(proxies: Proxies | None = None, **options: Any) -> Client:
        client = Client(ServiceTransport(proxies or Proxies.none(), **options))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.transport.aclose()


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client()


def answering(respond: Callable[[Request], bytes]) -> Handler:
    """A keep-alive server: every request on a connection gets `respond(request)`, until the client closes."""

    async def handle(peer: Peer) -> None:
        while request := await peer.request():
            await peer.send(respond(request))

    return handle


def reply(body: bytes = b"", *headers: str, status: str = "200 OK") -> bytes:
    """A raw answer with a Content-Length."""
    head = "".join(f"{header}\r\n" for header in (f"HTTP/1.1 {status}", *headers, f"Content-Length: {len(body)}"))
    return head.encode("latin-1") + b"\r\n" + body


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# TLS


@dataclass(frozen=True)
class Certificates:
    localhost: tuple[Path, Path]
    other_name: tuple[Path, Path]

    def server(self, chain: tuple[Path, Path]) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*chain)
        return context

    def trusting(self, chain: tuple[Path, Path]) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(chain[0]))


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certificates]:
    directory = tmp_path_factory.mktemp("certificates")
    yield Certificates(self_signed("localhost", directory), self_signed("secure.test", directory))


# Proxies


def _basic(credentials: bytes) -> str:
    return "Basic " + base64.b64encode(credentials).decode("ascii")


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy bytes until the source ends or either side fails."""
    with contextlib.suppress(ConnectionError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()


async def _copy_then_end(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    await _copy(source, sink)
    with contextlib.suppress(OSError, RuntimeError):
        sink.write_eof()


def tunnel(refusal: bytes | None = None) -> Handler:
    """A CONNECT proxy: tunnels to the host and port asked for, or answers `refusal`; either way it then waits for
    the client to close its end (counted as a disconnect), so a connection the client leaks is seen."""

    async def handle(peer: Peer) -> None:
        request = await peer.request()
        if request is None:
            return
        if refusal is not None or request.method != "CONNECT":
            await peer.send(refusal or reply(b"not a CONNECT", status="405 Method Not Allowed"))
            await peer.until_client_closes()
            return
        host, _, port = request.target.rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        await peer.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        # The origin's end only half-closes the tunnel: the client's end must still be closed by the client.
        back = asyncio.create_task(_copy_then_end(upstream_reader, peer.writer))
        try:
            await _copy(peer.reader, upstream_writer)
            await peer.server.note_disconnect()
        finally:
            upstream_writer.close()
            back.cancel()
            await asyncio.gather(back, return_exceptions=True)

    return handle


Socks = Callable[..., Awaitable[Socks5Proxy]]


@pytest.fixture
async def socks() -> AsyncIterator[Socks]:
    """Start a SOCKS5 proxy (tests/support/socks.py); stopped at teardown."""
    proxies: list[Socks5Proxy] = []

    async def start(**options: Any) -> Socks5Proxy:
        proxy = await Socks5Proxy(**options).start()
        proxies.append(proxy)
        return proxy

    yield start
    for proxy in proxies:
        await proxy.stop()


# Pools


async def test_sequential_requests_share_one_connection(serve: Serve, client: Client) -> None:
    server = await serve(answering(lambda request: OK))
    for path in ("/one", "/two", "/three"):
        assert (await client.get(server.url(path))).status_code == 200
    assert server.accepted == 1
    assert [r.connection for r in server.requests] == [0, 0, 0]


async def test_an_idle_connection_the_server_closed_is_replaced_without_an_error(
    serve: Serve, client: Client
) -> None:
    async def answer_then_close_when_idle(peer: Peer) -> None:
        if await peer.request():
            await peer.send(OK)
            await peer.close()

    server = await serve(answer_then_close_when_idle)
    assert (await client.get(server.url("/first"))).status_code == 200
    await server.until(lambda: server.server_closes == 1)
    second = await client.get(server.url("/second"))
    assert second.status_code == 200 and second.content == b"ok"
    assert server.accepted == 2
    assert [r.target for r in server.requests] == ["/first", "/second"]


async def test_requests_fill_small_pools_in_order_and_give_them_back_when_closed(
    serve: Serve, make_client: MakeClient
) -> None:
    """httpcore's scans grow with the square of a pool's connections: a burst is spread over several small pools."""
    client = make_client(connections=6, pool_size=2)
    all_arrived = asyncio.Event()

    async def answer_when_all_arrived(peer: Peer) -> None:
        while request := await peer.request():
            if len(peer.server.requests) == 5:
                all_arrived.set()
            await all_arrived.wait()
            await peer.send(reply(request.target.encode()))

    server = await serve(answer_when_all_arrived)
    paths = [f"/{n}" for n in range(5)]
    transport = client.transport
    responses = await asyncio.gather(*(transport.request("GET", server.url(path), timeout=PATIENT) for path in paths))
    assert transport.in_flight() == {(None, False): [2, 2, 1]}
    assert [await response.aread() for response in responses] == [path.encode() for path in paths]
    for response in responses:
        await response.aclose()
    assert transport.in_flight() == {(None, False): [0, 0, 0]}
    assert server.accepted == 5
    # The next request takes the first pool again, on a connection it kept.
    assert (await client.get(server.url("/again"))).content == b"/again"
    assert server.accepted == 5 and transport.in_flight() == {(None, False): [0, 0, 0]}


async def test_a_failed_request_gives_its_pool_back(make_client: MakeClient) -> None:
    client = make_client(connections=2, pool_size=1)
    with pytest.raises(httpx.ConnectError):
        await client.get(f"http://127.0.0.1:{unused_port()}/")
    assert client.transport.in_flight() == {(None, False): [0, 0]}


async def test_the_environment_is_never_read(serve: Serve, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Proxies come from Settings (config.py reads the environment); httpx's own reading of it is off."""
    origin = await serve(answering(lambda request: reply(b"direct")))
    proxy = await serve(answering(lambda request: reply(b"proxied")))
    for variable in ("HTTP_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
    assert (await client.get(origin.url())).content == b"direct"
    assert proxy.accepted == 0


# TLS


async def test_https_with_a_trusted_certificate_works_and_sends_the_name_in_sni(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    server = await serve(answering(lambda request: reply(b"secure hello")), tls=certificates.server(certificates.localhost))
    client = make_client(verify=certificates.trusting(certificates.localhost))
    for _ in range(2):
        response = await client.get(server.url("/secure", host="localhost", scheme="https"))
        assert response.status_code == 200 and response.content == b"secure hello"
    assert server.server_names == ["localhost"]
    assert server.accepted == 1


async def test_an_untrusted_certificate_is_a_connect_error(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    server = await serve(answering(lambda request: OK), tls=certificates.server(certificates.localhost))
    client = make_client(verify=certificates.trusting(certificates.other_name))
    with pytest.raises(httpx.ConnectError):
        await client.get(server.url(host="localhost", scheme="https"))
    assert server.requests == []


async def test_https_speaks_http_2_when_the_server_offers_it_many_requests_on_one_connection(
    make_client: MakeClient, certificates: Certificates
) -> None:
    import h2.config
    import h2.connection
    import h2.events

    connections: list[int] = []

    class Http2(asyncio.Protocol):
        """Answers every stream with its path, as HTTP/2 only."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            connections.append(1)
            self.transport = transport
            self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
            self.h2.initiate_connection()
            self.transport.write(self.h2.data_to_send())

        def data_received(self, data: bytes) -> None:
            for event in self.h2.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    path = dict(event.headers)[b":path"]
                    self.h2.send_headers(event.stream_id, [(":status", "200"), ("content-length", str(len(path)))])
                    self.h2.send_data(event.stream_id, path, end_stream=True)
            self.transport.write(self.h2.data_to_send())

    tls = certificates.server(certificates.localhost)
    tls.set_alpn_protocols(["h2"])
    server = await asyncio.get_running_loop().create_server(Http2, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    client = make_client(verify=certificates.trusting(certificates.localhost))
    try:
        answers = await asyncio.gather(*(client.get(f"https://localhost:{port}/{n}") for n in range(6)))
    finally:
        server.close()
    assert [(a.http_version, a.content) for a in answers] == [("HTTP/2", f"/{n}".encode()) for n in range(6)]
    assert len(connections) == 2  # one per pool of 4 requests, not one per request


# HTTP proxies


async def test_https_through_an_http_proxy_tunnels_with_connect_and_proxy_authorization(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    origin = await serve(answering(lambda request: reply(b"tunnelled")), tls=certificates.server(certificates.localhost))
    proxy = await serve(tunnel())
    proxies = Proxies.from_environment({"HTTPS_PROXY": f"http://alice:s%40cret@127.0.0.1:{proxy.port}"})
    client = make_client(proxies, verify=certificates.trusting(certificates.localhost))
    for _ in range(2):
        response = await client.get(origin.url("/through?x=1", host="localhost", scheme="https"))
        assert response.status_code == 200 and response.content == b"tunnelled"
    [connect] = proxy.requests
    assert (connect.method, connect.target) == ("CONNECT", f"localhost:{origin.port}")
    assert connect.header("proxy-authorization") == _basic(b"alice:s@cret")
    assert [r.target for r in origin.requests] == ["/through?x=1"] * 2
    assert all("proxy-authorization" not in r.names for r in origin.requests)
    assert origin.server_names == ["localhost"]
    assert (proxy.accepted, origin.accepted) == (1, 1)  # the tunnel is kept alive like any connection


async def test_plain_http_through_an_http_proxy_sends_the_absolute_url_to_the_proxy(
    serve: Serve, make_client: MakeClient
) -> None:
    proxy = await serve(answering(lambda request: reply(b"from the proxy")))
    client = make_client(Proxies.from_environment({"HTTP_PROXY": f"http://bob:pw@127.0.0.1:{proxy.port}"}))
    # The name never resolves: only the proxy can answer for it.
    response = await client.post("http://upstream.invalid:8080/path?q=1", content=b"payload")
    assert response.status_code == 200 and response.content == b"from the proxy"
    [request] = proxy.requests
    assert (request.method, request.target) == ("POST", "http://upstream.invalid:8080/path?q=1")
    assert request.header("proxy-authorization") == _basic(b"bob:pw")
    assert request.body == b"payload"


async def test_a_no_proxy_match_goes_direct(serve: Serve, make_client: MakeClient) -> None:
    origin = await serve(answering(lambda request: reply(b"direct")))
    proxy = await serve(answering(lambda request: reply(b"proxied")))
    proxy_url = f"http://127.0.0.1:{proxy.port}"
    environ = {"HTTP_PROXY": proxy_url, "HTTPS_PROXY": proxy_url, "NO_PROXY": "example.com, 127.0.0.1"}
    client = make_client(Proxies.from_environment(environ))
    assert (await client.get(origin.url())).content == b"direct"
    assert (origin.accepted, proxy.accepted) == (1, 0)


async def test_an_http_proxy_refusing_the_tunnel_is_a_proxy_error_naming_the_status(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    refusal = reply(b"who are you?", 'Proxy-Authenticate: Basic realm="proxy"', status="407 Proxy Authentication Required")
    proxy = await serve(tunnel(refusal))
    client = make_client(Proxies.from_environment({"HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"}))
    with pytest.raises(httpx.ProxyError, match="407"):
        await client.get(f"https://localhost:{unused_port()}/")
    await proxy.until(lambda: proxy.disconnects == 1)  # and the connection to the proxy is closed


# SOCKS5 proxies


async def test_plain_http_through_socks5_with_credentials_lets_the_proxy_resolve_the_name(
    serve: Serve, make_client: MakeClient, socks: Socks
) -> None:
    origin = await serve(answering(lambda request: reply(b"via socks")))
    proxy = await socks(names={"service.invalid": "127.0.0.1"}, credentials=("carol", "p@ss:w"))
    client = make_client(Proxies.from_environment({"ALL_PROXY": proxy.url(userinfo="carol:p%40ss%3Aw")}))
    for _ in range(2):
        response = await client.post(f"http://service.invalid:{origin.port}/hello", content=b"payload")
        assert response.status_code == 200 and response.content == b"via socks"
    # The name went to the proxy as a name: it does not resolve here.
    assert proxy.targets == [("name", "service.invalid", origin.port)]
    assert proxy.offered == [("carol", "p@ss:w")]
    assert [(r.target, r.body) for r in origin.requests] == [("/hello", b"payload")] * 2
    assert (proxy.accepted, origin.accepted) == (1, 1)


async def test_https_through_socks5h_checks_the_certificate_of_the_name(
    serve: Serve, make_client: MakeClient, socks: Socks, certificates: Certificates
) -> None:
    origin = await serve(answering(lambda request: reply(b"secure via socks")), tls=certificates.server(certificates.localhost))
    proxy = await socks(names={"localhost": "127.0.0.1"})
    proxies = Proxies.from_environment({"https_proxy": proxy.url("socks5h")})
    client = make_client(proxies, verify=certificates.trusting(certificates.localhost))
    response = await client.get(origin.url("/s", host="localhost", scheme="https"))
    assert response.status_code == 200 and response.content == b"secure via socks"
    assert proxy.targets == [("name", "localhost", origin.port)] and proxy.offered == []
    assert origin.server_names == ["localhost"]


async def test_a_socks5_proxy_that_cannot_reach_the_host_is_a_proxy_error(make_client: MakeClient, socks: Socks) -> None:
    proxy = await socks()
    client = make_client(Proxies.from_environment({"HTTP_PROXY": proxy.url()}))
    with pytest.raises(httpx.ProxyError):
        await client.get("http://nowhere.invalid/")
    assert proxy.targets == [("name", "nowhere.invalid", 80)]


async def test_wrong_socks5_credentials_are_a_proxy_error(make_client: MakeClient, socks: Socks) -> None:
    proxy = await socks(names={"service.invalid": "127.0.0.1"}, credentials=("carol", "right"))
    client = make_client(Proxies.from_environment({"HTTP_PROXY": proxy.url(userinfo="carol:wrong")}))
    with pytest.raises(httpx.ProxyError):
        await client.get("http://service.invalid/")
    assert proxy.offered == [("carol", "wrong")] and proxy.targets == []

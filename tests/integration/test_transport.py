"""bicameral.transport against real sockets: raw servers on 127.0.0.1 that answer, stall and misbehave on purpose."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bicameral.transport import (
    ConnectError,
    HttpClient,
    ProtocolError,
    Proxies,
    Timeouts,
    TransportError,
    TransportTimeout,
)
from tests.support.certificates import self_signed

# Generous limits: a stuck client fails as a timeout, not by hanging the suite; tests never wait on them.
PATIENT = Timeouts(connect=10, read=10, write=10)
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
MakeClient = Callable[..., HttpClient]


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
    """Clients with patient limits and no proxy unless told otherwise; closed at teardown."""
    clients: list[HttpClient] = []

    def make(**options: Any) -> HttpClient:
        options.setdefault("timeouts", PATIENT)
        options.setdefault("proxies", Proxies.none())
        client = HttpClient(**options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def client(make_client: MakeClient) -> HttpClient:
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


def chunked(*chunks: bytes) -> bytes:
    """A raw chunked 200 answer, one chunk per argument."""
    framed = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks if chunk)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# Requests and answers


async def test_get_returns_status_lower_case_headers_joined_and_body(serve: Serve, client: HttpClient) -> None:
    answer = reply(b"hello", "Content-Type: text/plain", "X-Trace: a", "x-trace: b", "X-TRACE: c")
    server = await serve(answering(lambda request: answer))
    response = await client.request("GET", server.url("/path?q=1&r=%20"), headers={"X-Token": "abc"})
    assert response.status == 200
    assert response.headers["content-type"] == "text/plain"
    assert response.headers["x-trace"] == "a, b, c"
    assert all(name == name.lower() for name in response.headers)
    assert await response.read() == b"hello"
    assert response.text == "hello"
    [request] = server.requests
    assert (request.method, request.target) == ("GET", "/path?q=1&r=%20")
    assert request.header("host") == f"127.0.0.1:{server.port}"
    assert request.header("x-token") == "abc"
    assert "accept-encoding" not in request.names
    assert "content-length" not in request.names and "transfer-encoding" not in request.names


async def test_post_delivers_its_body_and_headers_intact(serve: Serve, client: HttpClient) -> None:
    body = bytes(range(256)) * 1024 + b"\r\n\r\n0\r\n\r\n"
    server = await serve(answering(lambda request: reply(json.dumps({"got": len(request.body)}).encode())))
    headers = {"Content-Type": "application/octet-stream"}
    response = await client.request("POST", server.url("/upload"), headers=headers, body=body)
    assert response.status == 200 and response.json() == {"got": len(body)}
    [request] = server.requests
    assert request.method == "POST" and request.body == body
    assert request.header("content-length") == str(len(body))
    assert request.header("content-type") == "application/octet-stream"
    assert request.header("host") == f"127.0.0.1:{server.port}"


async def test_a_post_without_a_body_says_content_length_0(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: OK))
    await client.request("POST", server.url("/ping"))
    [request] = server.requests
    assert request.header("content-length") == "0" and request.body == b""


async def test_json_and_text_decode_the_body(serve: Serve, client: HttpClient) -> None:
    bodies = iter([b'{"ok": true, "result": {"message_id": 7}}', "caf\u00e9 \xff".encode() + b"\xff"])
    server = await serve(answering(lambda request: reply(next(bodies), "Content-Type: application/json")))
    assert (await client.request("GET", server.url())).json() == {"ok": True, "result": {"message_id": 7}}
    assert (await client.request("GET", server.url())).text == "caf\u00e9 \xff\ufffd"


async def test_a_chunked_answer_is_joined_and_its_connection_reused(serve: Serve, client: HttpClient) -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    server = await serve(answering(lambda request: answer))
    for _ in range(2):
        response = await client.request("GET", server.url())
        assert response.status == 200 and await response.read() == b"hello, world"
    assert server.accepted == 1


async def test_an_answer_delimited_by_the_close_is_read_to_the_end(serve: Serve, client: HttpClient) -> None:
    async def answer_until_close(peer: Peer) -> None:
        if await peer.request():
            await peer.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nevery byte until the close")
            await peer.close()

    server = await serve(answer_until_close)
    for _ in range(2):
        response = await client.request("GET", server.url())
        assert await response.read() == b"every byte until the close"
    assert server.accepted == 2


async def test_answers_without_a_body_end_at_their_headers(serve: Serve, client: HttpClient) -> None:
    answers = iter(
        [
            b"HTTP/1.1 204 No Content\r\nX-Kind: none\r\n\r\n",
            b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nContent-Length: 1234\r\n\r\n',
            b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",  # the answer to HEAD: the size a GET would get
            OK,
        ]
    )
    server = await serve(answering(lambda request: next(answers)))
    no_content = await client.request("POST", server.url("/delete"), body=b"x")
    not_modified = await client.request("GET", server.url("/cached"), headers={"If-None-Match": '"v1"'})
    head = await client.request("HEAD", server.url("/big"))
    after = await client.request("GET", server.url("/after"))
    assert [r.status for r in (no_content, not_modified, head, after)] == [204, 304, 200, 200]
    assert [await r.read() for r in (no_content, not_modified, head, after)] == [b"", b"", b"", b"ok"]
    assert no_content.headers["x-kind"] == "none" and not_modified.headers["etag"] == '"v1"'
    assert server.accepted == 1


async def test_a_large_body_arrives_intact(serve: Serve, client: HttpClient) -> None:
    body = bytes(range(256)) * 20_000 + b"tail"
    server = await serve(answering(lambda request: reply(body)))
    assert await (await client.request("GET", server.url())).read() == body


async def test_header_bytes_outside_ascii_do_not_break_the_answer(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: reply(b"ok", "X-Name: caf\u00e9", "X-Bytes: \u00c3\u00a9")))
    response = await client.request("GET", server.url())
    assert response.status == 200 and response.headers["x-name"] and response.headers["x-bytes"]


async def test_an_http_1_0_answer_or_a_request_saying_close_is_not_kept(serve: Serve, client: HttpClient) -> None:
    answers = iter([b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", OK, OK, OK])

    async def answer(peer: Peer) -> None:
        while await peer.request():
            await peer.send(next(answers))

    server = await serve(answer)
    assert await (await client.request("GET", server.url())).read() == b"ok"
    await client.request("GET", server.url(), headers={"Connection": "close"})
    await client.request("GET", server.url())
    assert server.accepted == 3
    assert client.idle_connections() == 1


async def test_an_informational_answer_before_the_final_one_is_skipped(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"final", "X-Final: yes")))
    response = await client.request("POST", server.url(), body=b"payload")
    assert response.status == 200 and response.headers["x-final"] == "yes" and await response.read() == b"final"


async def test_a_url_without_a_path_asks_for_the_root(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: OK))
    await client.request("GET", f"http://127.0.0.1:{server.port}")
    await client.request("GET", f"http://127.0.0.1:{server.port}?q=1")
    assert [r.target for r in server.requests] == ["/", "/?q=1"]


async def test_an_ipv6_literal_is_reached_and_named_in_brackets(client: HttpClient) -> None:
    requests: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(OK)
        await writer.drain()
        await reader.read()
        writer.close()

    try:
        server = await asyncio.start_server(answer, "::1", 0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = server.sockets[0].getsockname()[1]
    try:
        assert (await client.request("GET", f"http://[::1]:{port}/v6")).status == 200
        assert f"\r\nhost: [::1]:{port}\r\n".encode() in requests[0].lower()
    finally:
        server.close()
        await client.aclose()
        await server.wait_closed()


# Keep-alive


async def test_sequential_requests_share_one_connection(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: OK))
    for path in ("/one", "/two", "/three"):
        assert (await client.request("GET", server.url(path))).status == 200
    assert server.accepted == 1
    assert [r.connection for r in server.requests] == [0, 0, 0]
    assert client.idle_connections() == 1


async def test_a_server_saying_connection_close_gets_a_new_connection_next_time(serve: Serve, client: HttpClient) -> None:
    async def answer_once_and_close(peer: Peer) -> None:
        if await peer.request():
            await peer.send(reply(b"bye", "Connection: close"))
            await peer.close()

    server = await serve(answer_once_and_close)
    assert await (await client.request("GET", server.url())).read() == b"bye"
    assert client.idle_connections() == 0
    assert await (await client.request("GET", server.url())).read() == b"bye"
    assert server.accepted == 2


async def test_an_idle_connection_the_server_closed_is_replaced_without_an_error(serve: Serve, client: HttpClient) -> None:
    async def answer_then_close_when_idle(peer: Peer) -> None:
        if await peer.request():
            await peer.send(OK)
            await peer.close()

    server = await serve(answer_then_close_when_idle)
    assert (await client.request("GET", server.url("/first"))).status == 200
    await server.until(lambda: server.server_closes == 1)
    second = await client.request("GET", server.url("/second"))
    assert second.status == 200 and await second.read() == b"ok"
    assert server.accepted == 2
    assert [r.target for r in server.requests] == ["/first", "/second"]


async def test_an_idle_connection_the_server_timed_out_with_a_408_is_replaced(serve: Serve, client: HttpClient) -> None:
    async def answer_then_time_out(peer: Peer) -> None:
        if await peer.request():
            await peer.send(OK)
            # What several servers send on an idle keep-alive connection before they close it.
            await peer.send(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            await peer.close()

    server = await serve(answer_then_time_out)
    assert (await client.request("GET", server.url("/first"))).status == 200
    await server.until(lambda: server.server_closes == 1)
    second = await client.request("GET", server.url("/second"))
    assert second.status == 200 and await second.read() == b"ok"
    assert server.accepted == 2


async def test_a_connection_idle_longer_than_idle_expiry_is_dropped(serve: Serve, make_client: MakeClient) -> None:
    now = [1000.0]
    client = make_client(idle_expiry=30.0, clock=lambda: now[0])
    server = await serve(answering(lambda request: OK))
    for moment, connections in ((1000.0, 1), (1029.0, 1), (1058.0, 1), (1089.0, 2), (1090.0, 2)):
        now[0] = moment
        assert (await client.request("GET", server.url())).status == 200
        assert server.accepted == connections, moment
    assert client.idle_connections() == 1
    await server.until(lambda: server.disconnects == 1)  # the expired connection was closed, not leaked


async def test_concurrent_requests_each_get_a_connection_and_the_idle_ones_are_capped(
    serve: Serve, make_client: MakeClient
) -> None:
    client = make_client(idle_per_origin=2)
    all_arrived = asyncio.Event()

    async def answer_when_all_arrived(peer: Peer) -> None:
        while request := await peer.request():
            if len(peer.server.requests) == 5:
                all_arrived.set()
            await all_arrived.wait()
            await peer.send(reply(request.target.encode()))

    server = await serve(answer_when_all_arrived)
    paths = [f"/{n}" for n in range(5)]
    answers = await asyncio.gather(*(client.request("GET", server.url(path)) for path in paths))
    assert [await a.read() for a in answers] == [p.encode() for p in paths]
    assert server.accepted == 5
    assert client.idle_connections() <= 2
    await server.until(lambda: server.disconnects >= 3)  # the ones not kept were closed
    assert (await client.request("GET", server.url("/again"))).status == 200
    assert server.accepted == 5


async def test_the_most_recently_used_idle_connection_is_used_first(serve: Serve, client: HttpClient) -> None:
    both_arrived, release_second = asyncio.Event(), asyncio.Event()

    async def hold(peer: Peer) -> None:
        while request := await peer.request():
            if len(peer.server.requests) == 2:
                both_arrived.set()
            await both_arrived.wait()
            if request.target == "/second":
                await release_second.wait()
            await peer.send(OK)

    server = await serve(hold)
    first = asyncio.create_task(client.request("GET", server.url("/first")))
    second = asyncio.create_task(client.request("GET", server.url("/second")))
    await first
    release_second.set()
    await second
    await client.request("GET", server.url("/third"))
    connection_of = {r.target: r.connection for r in server.requests}
    assert connection_of["/first"] != connection_of["/second"]
    assert connection_of["/third"] == connection_of["/second"]


async def test_each_origin_has_its_own_pool(serve: Serve, client: HttpClient) -> None:
    one, other = await serve(answering(lambda request: OK)), await serve(answering(lambda request: OK))
    for server in (one, other, one, other):
        await client.request("GET", server.url())
    assert (one.accepted, other.accepted) == (1, 1)
    assert client.idle_connections() == 2


async def test_aclose_closes_the_idle_connections(serve: Serve, make_client: MakeClient) -> None:
    client = make_client()
    server = await serve(answering(lambda request: OK))
    await client.request("GET", server.url())
    await client.aclose()
    await server.until(lambda: server.disconnects == 1)
    assert client.idle_connections() == 0


# Lines of a streamed body

# \u2028, \x0b, \x0c, \x1c-\x1e and \x85 end lines for str.splitlines(), but not in an HTTP body or an event stream.
SSE = "data: one\n\ndata: two\r\n\r\ndata: three\r\rdata: é€😀\n: \u2028\x0b\x0c\x1c\x1d\x1e\x85 stay\r\nlast".encode()
SSE_LINES = ["data: one", "", "data: two", "", "data: three", "", "data: é€😀", ": \u2028\x0b\x0c\x1c\x1d\x1e\x85 stay", "last"]


async def _lines(client: HttpClient, url: str) -> list[str]:
    async with client.stream("GET", url) as response:
        assert response.status == 200
        return [line async for line in response.lines()]


async def test_lines_of_a_body_sent_one_byte_at_a_time(serve: Serve, client: HttpClient) -> None:
    async def trickle(peer: Peer) -> None:
        while await peer.request():
            await peer.trickle(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(SSE))
            await peer.trickle(SSE)

    server = await serve(trickle)
    assert await _lines(client, server.url()) == SSE_LINES


async def test_lines_of_a_body_sent_one_byte_per_chunk(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: chunked(*(SSE[i : i + 1] for i in range(len(SSE))))))
    assert await _lines(client, server.url()) == SSE_LINES


async def test_lines_of_a_body_split_in_two_at_every_byte(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: chunked(SSE[: int(request.target[1:])], SSE[int(request.target[1:]) :])))
    for split in range(len(SSE) + 1):
        assert await _lines(client, server.url(f"/{split}")) == SSE_LINES, f"split at byte {split}"
    assert server.accepted == 1


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        (b"", []),
        (b"\n", [""]),
        (b"a\n", ["a"]),
        (b"a\r\n", ["a"]),
        (b"a\r", ["a"]),
        (b"\r\n\r\n", ["", ""]),
        (b"a\r\r\nb", ["a", "", "b"]),
        (b"a\n\rb", ["a", "", "b"]),
        (b"no ending", ["no ending"]),
        (b"bad \xff byte\n", ["bad \ufffd byte"]),
        (b"cut short \xe2\x82", ["cut short \ufffd"]),
    ],
)
async def test_line_endings_and_undecodable_bytes(serve: Serve, client: HttpClient, body: bytes, lines: list[str]) -> None:
    server = await serve(answering(lambda request: chunked(*(body[i : i + 1] for i in range(len(body))))))
    assert await _lines(client, server.url()) == lines


# Streams left early


def _endless(first: bytes, *, in_chunks: bool) -> Handler:
    """An answer that starts with `first`, then never ends (until the client closes); any later request gets OK."""

    async def handle(peer: Peer) -> None:
        while request := await peer.request():
            if request.target != "/endless":
                await peer.send(OK)
                continue
            framing = "Transfer-Encoding: chunked" if in_chunks else "Content-Length: 1000000"
            head = f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{framing}\r\n\r\n".encode()
            await peer.send(head + (b"%x\r\n%s\r\n" % (len(first), first) if in_chunks else first))
            await peer.until_client_closes()
            return

    return handle


@pytest.mark.parametrize("is_chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_stream_left_before_its_body_ended_closes_its_connection(
    serve: Serve, client: HttpClient, is_chunked: bool
) -> None:
    server = await serve(_endless(b"data: first\n\n", in_chunks=is_chunked))
    async with asyncio.timeout(10):
        async with client.stream("GET", server.url("/endless")) as response:
            lines = response.lines()
            assert await anext(lines) == "data: first"
        await server.until(lambda: server.disconnects == 1)
    assert client.idle_connections() == 0
    assert (await client.request("GET", server.url("/next"))).status == 200
    assert server.accepted == 2


async def test_a_stream_left_without_reading_anything_closes_its_connection(serve: Serve, client: HttpClient) -> None:
    server = await serve(_endless(b"data: never read\n\n", in_chunks=False))
    async with asyncio.timeout(10):
        async with client.stream("GET", server.url("/endless")) as response:
            assert response.status == 200
        await server.until(lambda: server.disconnects == 1)
    assert (await client.request("GET", server.url("/next"))).status == 200
    assert server.accepted == 2


async def test_aclose_on_an_unfinished_responsecloses_its_connection(serve: Serve, client: HttpClient) -> None:
    server = await serve(_endless(b"partial", in_chunks=True))
    async with asyncio.timeout(10), client.stream("GET", server.url("/endless")) as response:
        await response.aclose()
        await server.until(lambda: server.disconnects == 1)
    assert (await client.request("GET", server.url("/next"))).status == 200
    assert server.accepted == 2


async def test_a_stream_read_to_its_end_gives_its_connection_back(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: chunked(b"data: a\n\n", b"data: b\n\n")))
    assert await _lines(client, server.url()) == ["data: a", "", "data: b", ""]
    async with client.stream("GET", server.url()) as response:
        assert await response.read() == b"data: a\n\ndata: b\n\n"
    assert (await client.request("GET", server.url())).status == 200
    assert server.accepted == 1


# Failures


async def test_a_refused_port_is_a_connect_error(client: HttpClient) -> None:
    with pytest.raises(ConnectError) as refused:
        await client.request("GET", f"http://127.0.0.1:{unused_port()}/")
    assert isinstance(refused.value, TransportError)


async def test_a_name_that_does_not_resolve_is_a_connect_error(client: HttpClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_name(*_args: object, **_kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    # The resolver's answer, without depending on the machine having one that answers quickly.
    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    with pytest.raises(ConnectError, match=r"no-such-host\.invalid"):
        await client.request("GET", "http://no-such-host.invalid/")


@pytest.mark.parametrize("host", ["empty..label", "a" * 64 + ".too-long-label"])
async def test_a_name_that_cannot_even_be_looked_up_is_a_connect_error(client: HttpClient, host: str) -> None:
    with pytest.raises(ConnectError):
        await client.request("GET", f"http://{host}/")


async def test_a_connection_that_is_never_accepted_times_out_in_the_connect_phase(client: HttpClient) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        # Fill the accept queue: the kernel drops further handshakes, so the next connect waits.
        fillers = [socket.socket() for _ in range(4)]
        for filler in fillers:
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        try:
            with pytest.raises(TransportTimeout) as timed_out:
                await client.request("GET", f"http://127.0.0.1:{port}/", timeouts=Timeouts(connect=0.2))
        finally:
            for filler in fillers:
                filler.close()
    assert timed_out.value.phase == "connect"


async def test_a_server_that_never_answers_times_out_in_the_read_phase(serve: Serve, client: HttpClient) -> None:
    async def never_answer(peer: Peer) -> None:
        if await peer.request():
            await peer.until_client_closes()

    server = await serve(never_answer)
    with pytest.raises(TransportTimeout) as timed_out:
        await client.request("GET", server.url(), timeouts=Timeouts(read=0.2))
    assert timed_out.value.phase == "read" and isinstance(timed_out.value, TransportError)
    await server.until(lambda: server.disconnects == 1)
    assert client.idle_connections() == 0


async def test_a_body_that_stalls_times_out_in_the_read_phase(serve: Serve, make_client: MakeClient) -> None:
    client = make_client(timeouts=Timeouts(connect=10, read=0.2, write=10))
    server = await serve(_endless(b"data: first\n\n", in_chunks=False))
    async with client.stream("GET", server.url("/endless")) as response:
        with pytest.raises(TransportTimeout) as timed_out:
            await response.read()
    assert timed_out.value.phase == "read"
    await server.until(lambda: server.disconnects == 1)


async def test_a_server_that_never_reads_times_out_in_the_write_phase(serve: Serve, client: HttpClient) -> None:
    reading_nothing = asyncio.Event()

    async def never_read(peer: Peer) -> None:
        await reading_nothing.wait()

    server = await serve(never_read)
    body = b"x" * (64 * 1024 * 1024)  # far more than the socket buffers on both sides hold
    with pytest.raises(TransportTimeout) as timed_out:
        await client.request("POST", server.url(), body=body, timeouts=Timeouts(write=0.2))
    assert timed_out.value.phase == "write"
    reading_nothing.set()


async def test_a_close_in_the_middle_of_the_body_is_a_protocol_error(serve: Serve, client: HttpClient) -> None:
    async def cut_short(peer: Peer) -> None:
        if await peer.request():
            await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
            await peer.close()

    server = await serve(cut_short)
    with pytest.raises(ProtocolError):
        await client.request("GET", server.url())
    async with client.stream("GET", server.url()) as response:
        with pytest.raises(ProtocolError):
            await response.read()
    async with client.stream("GET", server.url()) as response:
        with pytest.raises(ProtocolError):
            [line async for line in response.lines()]
    assert client.idle_connections() == 0


async def test_a_chunked_body_cut_short_is_a_protocol_error(serve: Serve, client: HttpClient) -> None:
    async def cut_short(peer: Peer) -> None:
        if await peer.request():
            await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            await peer.close()

    server = await serve(cut_short)
    with pytest.raises(ProtocolError):
        await client.request("GET", server.url())


@pytest.mark.parametrize(
    "answer",
    [
        b"HELLO WORLD\r\n\r\n",
        b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\ntoo long\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 20_000,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
    ],
    ids=[
        "garbage-status-line", "non-numeric-status", "header-without-colon", "bad-content-length", "bad-chunk", "nothing",
        "chunk-longer-than-its-size", "endless-chunk-size-line", "unsupported-coding", "unasked-protocol-switch",
    ],
)
async def test_a_malformed_answer_is_a_protocol_error(serve: Serve, client: HttpClient, answer: bytes) -> None:
    async def misbehave(peer: Peer) -> None:
        if await peer.request():
            await peer.send(answer)
            await peer.close()

    server = await serve(misbehave)
    with pytest.raises(ProtocolError):
        await client.request("GET", server.url())
    assert client.idle_connections() == 0


@pytest.mark.parametrize(
    "url", ["ftp://example.org/bot123:SECRET/x", "http:///bot123:SECRET/x", "http://example.org:99999/bot123:SECRET/x"]
)
async def test_a_url_the_client_cannot_use_is_refused_without_quoting_it(client: HttpClient, url: str) -> None:
    with pytest.raises(TransportError) as caught:
        await client.request("GET", url)
    assert "SECRET" not in str(caught.value)


async def test_100_kb_of_headers_is_a_protocol_error(serve: Serve, client: HttpClient) -> None:
    huge = b"".join(b"X-Filler-%04d: %s\r\n" % (n, b"v" * 80) for n in range(1100))
    assert len(huge) > 100_000

    async def flood(peer: Peer) -> None:
        if await peer.request():
            with contextlib.suppress(ConnectionError):
                await peer.send(b"HTTP/1.1 200 OK\r\n" + huge + b"Content-Length: 2\r\n\r\nok")
            await peer.until_client_closes()

    server = await serve(flood)
    with pytest.raises(ProtocolError):
        await client.request("GET", server.url())
    await server.until(lambda: server.disconnects == 1)


async def test_one_header_line_of_100_kb_is_a_protocol_error(serve: Serve, client: HttpClient) -> None:
    server = await serve(answering(lambda request: reply(b"ok", "X-Huge: " + "v" * 100_000)))
    with pytest.raises(ProtocolError):
        await client.request("GET", server.url())


async def test_a_request_cancelled_while_waiting_leaves_the_client_usable(serve: Serve, client: HttpClient) -> None:
    first_arrived = asyncio.Event()

    async def hold_the_first(peer: Peer) -> None:
        while request := await peer.request():
            if request.target == "/held":
                first_arrived.set()
                await peer.until_client_closes()
                return
            await peer.send(OK)

    server = await serve(hold_the_first)
    held = asyncio.create_task(client.request("GET", server.url("/held")))
    await first_arrived.wait()
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    after = await client.request("GET", server.url("/after"))
    assert after.status == 200 and await after.read() == b"ok"
    assert server.accepted == 2
    await server.until(lambda: server.disconnects == 1)  # the cancelled one was closed, not pooled
    assert client.idle_connections() == 1


async def test_a_stream_cancelled_while_reading_leaves_the_client_usable(serve: Serve, client: HttpClient) -> None:
    server = await serve(_endless(b"data: first\n\n", in_chunks=True))
    got_first = asyncio.Event()

    async def read_forever() -> None:
        async with client.stream("GET", server.url("/endless")) as response:
            async for _ in response.lines():
                got_first.set()

    reader = asyncio.create_task(read_forever())
    await got_first.wait()
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    await server.until(lambda: server.disconnects == 1)
    assert (await client.request("GET", server.url("/next"))).status == 200
    assert server.accepted == 2


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


async def test_https_with_a_trusted_certificate_works_and_sends_the_name_in_sni(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    server = await serve(answering(lambda request: reply(b"secure hello")), tls=certificates.server(certificates.localhost))
    client = make_client(ssl_context=certificates.trusting(certificates.localhost))
    for _ in range(2):
        response = await client.request("GET", server.url("/secure", host="localhost", scheme="https"))
        assert response.status == 200 and await response.read() == b"secure hello"
    assert server.server_names == ["localhost"]
    assert server.accepted == 1
    assert [r.header("host") for r in server.requests] == [f"localhost:{server.port}"] * 2


async def test_an_untrusted_certificate_is_a_connect_error(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    server = await serve(answering(lambda request: OK), tls=certificates.server(certificates.localhost))
    client = make_client(ssl_context=certificates.trusting(certificates.other_name))
    with pytest.raises(ConnectError):
        await client.request("GET", server.url(host="localhost", scheme="https"))
    assert server.requests == []


async def test_a_certificate_for_another_name_is_a_connect_error(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    server = await serve(answering(lambda request: OK), tls=certificates.server(certificates.other_name))
    client = make_client(ssl_context=certificates.trusting(certificates.other_name))
    with pytest.raises(ConnectError):
        await client.request("GET", server.url(host="localhost", scheme="https"))
    assert server.requests == []


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


async def test_https_through_a_proxy_tunnels_with_connect_and_proxy_authorization(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    origin = await serve(answering(lambda request: reply(b"tunnelled")), tls=certificates.server(certificates.localhost))
    proxy = await serve(tunnel())
    proxies = Proxies.from_environment({"HTTPS_PROXY": f"http://alice:s%40cret@127.0.0.1:{proxy.port}"})
    client = make_client(ssl_context=certificates.trusting(certificates.localhost), proxies=proxies)
    response = await client.request("GET", origin.url("/through?x=1", host="localhost", scheme="https"))
    assert response.status == 200 and await response.read() == b"tunnelled"
    [connect] = proxy.requests
    assert (connect.method, connect.target) == ("CONNECT", f"localhost:{origin.port}")
    assert connect.header("proxy-authorization") == _basic(b"alice:s@cret")
    [request] = origin.requests
    assert request.target == "/through?x=1" and request.header("host") == f"localhost:{origin.port}"
    assert "proxy-authorization" not in request.names
    assert origin.server_names == ["localhost"]


async def test_a_tunnel_is_kept_alive_like_any_connection(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    origin = await serve(answering(lambda request: OK), tls=certificates.server(certificates.localhost))
    proxy = await serve(tunnel())
    proxies = Proxies.from_environment({"https_proxy": f"127.0.0.1:{proxy.port}"})
    client = make_client(ssl_context=certificates.trusting(certificates.localhost), proxies=proxies)
    for _ in range(2):
        assert (await client.request("GET", origin.url(host="localhost", scheme="https"))).status == 200
    [connect] = proxy.requests
    assert "proxy-authorization" not in connect.names
    assert (proxy.accepted, origin.accepted, len(origin.requests)) == (1, 1, 2)


async def test_plain_http_through_a_proxy_sends_the_absolute_url_to_the_proxy(serve: Serve, make_client: MakeClient) -> None:
    proxy = await serve(answering(lambda request: reply(b"from the proxy")))
    proxies = Proxies.from_environment({"HTTP_PROXY": f"http://bob:pw@127.0.0.1:{proxy.port}"})
    client = make_client(proxies=proxies)
    # The name never resolves: only the proxy can answer for it.
    response = await client.request("POST", "http://upstream.invalid:8080/path?q=1", body=b"payload")
    assert response.status == 200 and await response.read() == b"from the proxy"
    [request] = proxy.requests
    assert (request.method, request.target) == ("POST", "http://upstream.invalid:8080/path?q=1")
    assert request.header("host") == "upstream.invalid:8080"
    assert request.header("proxy-authorization") == _basic(b"bob:pw")
    assert request.body == b"payload"


async def test_a_no_proxy_match_goes_direct(serve: Serve, make_client: MakeClient) -> None:
    origin = await serve(answering(lambda request: reply(b"direct")))
    proxy = await serve(answering(lambda request: reply(b"proxied")))
    proxy_url = f"http://127.0.0.1:{proxy.port}"
    proxies = Proxies.from_environment({"HTTP_PROXY": proxy_url, "HTTPS_PROXY": proxy_url, "NO_PROXY": "example.com, 127.0.0.1"})
    client = make_client(proxies=proxies)
    assert await (await client.request("GET", origin.url())).read() == b"direct"
    assert (origin.accepted, proxy.accepted) == (1, 0)


async def test_a_proxy_refusing_the_tunnel_is_a_connect_error_naming_the_status(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    refusal = reply(b"who are you?", 'Proxy-Authenticate: Basic realm="proxy"', status="407 Proxy Authentication Required")
    proxy = await serve(tunnel(refusal))
    proxies = Proxies.from_environment({"HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"})
    client = make_client(ssl_context=certificates.trusting(certificates.localhost), proxies=proxies)
    async with asyncio.timeout(10):
        with pytest.raises(ConnectError) as refused:
            await client.request("GET", f"https://localhost:{unused_port()}/")
        await proxy.until(lambda: proxy.disconnects == 1)
    message = str(refused.value)
    assert "407" in message and "proxy" in message.lower() and "refus" in message.lower()
    assert client.idle_connections() == 0


async def test_an_untrusted_certificate_behind_a_tunnel_is_a_connect_error_and_the_tunnel_is_closed(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    origin = await serve(answering(lambda request: OK), tls=certificates.server(certificates.other_name))
    proxy = await serve(tunnel())
    proxies = Proxies.from_environment({"HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"})
    client = make_client(ssl_context=certificates.trusting(certificates.localhost), proxies=proxies)
    with pytest.raises(ConnectError):
        await client.request("GET", origin.url(host="localhost", scheme="https"))
    await proxy.until(lambda: proxy.disconnects == 1)
    assert origin.requests == [] and client.idle_connections() == 0


async def test_a_proxy_that_never_answers_connect_times_out_in_the_connect_phase(
    serve: Serve, make_client: MakeClient, certificates: Certificates
) -> None:
    async def silent(peer: Peer) -> None:
        if await peer.request():
            await peer.until_client_closes()

    proxy = await serve(silent)
    proxies = Proxies.from_environment({"HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"})
    client = make_client(ssl_context=certificates.trusting(certificates.localhost), proxies=proxies)
    with pytest.raises(TransportTimeout) as timed_out:
        await client.request("GET", f"https://localhost:{unused_port()}/", timeouts=Timeouts(connect=0.2))
    assert timed_out.value.phase == "connect"
    await proxy.until(lambda: proxy.disconnects == 1)

"""HTTP/1.1 framing: what a request may hold, how an answer's head reads, and how its body is delimited."""

from __future__ import annotations

import pytest

from bicameral.transport import ProtocolError, TransportError
from bicameral.transport.wire import (
    BY_LENGTH,
    CHUNKED,
    NO_BODY,
    UNTIL_CLOSE,
    chunk_size,
    encode_request,
    framing,
    head_end,
    parse_head,
)


def test_a_request_is_its_line_headers_blank_line_and_body() -> None:
    data = encode_request("POST", "/bot1/sendMessage?x=1", [("host", "example.org"), ("content-length", "2")], b"hi")
    assert data == b"POST /bot1/sendMessage?x=1 HTTP/1.1\r\nhost: example.org\r\ncontent-length: 2\r\n\r\nhi"


@pytest.mark.parametrize(
    ("method", "target", "headers"),
    [
        ("GET", "/", [("authorization", "Bearer key\r\nx-injected: yes")]),
        ("GET", "/", [("x-key", "value\nwith a break")]),
        ("GET", "/", [("x-key", "nul\x00")]),
        ("GET", "/", [("bad name", "v")]),
        ("GET", "/", [("x\r\ninjected", "v")]),
        ("GET", "/path\r\nHost: evil", []),
        ("GET", "/a b", []),
        ("GE T", "/", []),
        ("GET", "/", [("x-name", "snowman ☃")]),
    ],
)
def test_what_http_forbids_in_a_request_is_refused_without_quoting_it(
    method: str, target: str, headers: list[tuple[str, str]]
) -> None:
    with pytest.raises(TransportError) as caught:
        encode_request(method, target, headers, b"")
    assert "key" not in str(caught.value).replace("x-key", "") and "injected" not in str(caught.value)


def test_latin1_header_values_pass() -> None:
    assert b"x-name: caf\xe9" in encode_request("GET", "/", [("x-name", "café")], b"")


@pytest.mark.parametrize(
    ("buffer", "end"),
    [
        (b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody", 25),
        (b"HTTP/1.1 200 OK\nA: b\n\nbody", 22),
        (b"HTTP/1.1 200 OK\r\nA: b\r\n", -1),
        (b"", -1),
    ],
)
def test_the_end_of_a_head_is_its_blank_line(buffer: bytes, end: int) -> None:
    assert head_end(buffer) == end


def test_a_head_reads_status_and_lower_case_headers_with_repeats_joined() -> None:
    head = parse_head(b"HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nVary: a\r\nvary:  b \r\nX-Empty:\r\n")
    assert (head.minor_version, head.status) == (1, 201)
    assert head.headers == {"content-type": "text/plain", "vary": "a, b", "x-empty": ""}


def test_a_status_line_without_a_reason_is_read() -> None:
    assert parse_head(b"HTTP/1.0 204").status == 204


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/2 200 OK",
        b"HTTP/1.1 20 OK",
        b"ICY 200 OK",
        b"HTTP/1.1 200 OK\r\n folded: value",
        b"HTTP/1.1 200 OK\r\nno colon here",
        b"HTTP/1.1 200 OK\r\nspace before : colon",
        b"HTTP/1.1 200 OK\r\n: empty name",
        b"HTTP/1.1 200 OK\r\nx: carriage\rreturn",
        b"garbage",
    ],
)
def test_a_malformed_head_is_a_protocol_error(head: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_head(head)


def _framing(head: bytes, method: str = "GET", asked_to_close: bool = False) -> tuple[str, int, bool]:
    frame = framing(parse_head(head), method, asked_to_close)
    return frame.kind, frame.length, frame.keep_alive


def test_the_body_framing_follows_the_rules_in_their_order() -> None:
    assert _framing(b"HTTP/1.1 200 OK\r\nContent-Length: 5") == (BY_LENGTH, 5, True)
    assert _framing(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5") == (BY_LENGTH, 5, True)
    assert _framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked") == (CHUNKED, 0, True)
    assert _framing(b"HTTP/1.1 200 OK\r\nContent-Length: 5", method="HEAD") == (NO_BODY, 0, True)
    assert _framing(b"HTTP/1.1 204 No Content\r\nContent-Length: 5") == (NO_BODY, 0, True)
    assert _framing(b"HTTP/1.1 304 Not Modified") == (NO_BODY, 0, True)
    assert _framing(b"HTTP/1.1 200 OK") == (UNTIL_CLOSE, 0, False)


def test_what_ends_a_kept_alive_connection() -> None:
    assert _framing(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0")[2] is False
    assert _framing(b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0")[2] is False
    assert _framing(b"HTTP/1.0 200 OK\r\nContent-Length: 0")[2] is False
    assert _framing(b"HTTP/1.1 200 OK\r\nContent-Length: 0", asked_to_close=True)[2] is False
    # Chunks beside a length: the chunks are read, and the connection is not trusted after.
    assert _framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3") == (CHUNKED, 0, False)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0x10",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xd9\xa3",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked",
    ],
)
def test_a_length_or_coding_that_cannot_be_trusted_is_a_protocol_error(head: bytes) -> None:
    with pytest.raises(ProtocolError):
        framing(parse_head(head), "GET", False)


def test_chunk_sizes_are_hex_with_extensions_ignored() -> None:
    assert chunk_size(b"1a") == 26
    assert chunk_size(b"0") == 0
    assert chunk_size(b"FF;name=value") == 255
    for bad in (b"", b"xyz", b"-1", b"1" * 17, b" "):
        with pytest.raises(ProtocolError):
            chunk_size(bad)

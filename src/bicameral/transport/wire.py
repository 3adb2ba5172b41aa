"""HTTP/1.1 framing for a client: requests to bytes, and an answer's head and body framing read back.

Strict where a lax reading could be exploited (header names, line breaks in values, conflicting
lengths), lenient where servers are known to differ harmlessly (a bare LF, no reason phrase).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ProtocolError, TransportError

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n\x00]*)?")
_FORBIDDEN_IN_VALUES = re.compile(r"[\r\n\x00]")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_NO_BODY_STATUSES = frozenset({204, 304})

NO_BODY = "none"
BY_LENGTH = "length"
CHUNKED = "chunked"
UNTIL_CLOSE = "close"


@dataclass(frozen=True, slots=True)
class Head:
    """An answer's status line and headers (names lower-case; a repeated field's values joined with ", ")."""

    minor_version: int  # HTTP/1.<minor>
    status: int
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Framing:
    """How the body after a head is delimited, and whether the connection can carry another request after it."""

    kind: str  # NO_BODY, BY_LENGTH, CHUNKED or UNTIL_CLOSE
    length: int = 0
    keep_alive: bool = True


def encode_request(method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The request's bytes; TransportError for a header or target HTTP forbids, before anything is sent.

    The error never quotes the offending value: a header may hold a credential.
    """
    if not _TOKEN.fullmatch(method.encode("latin-1", "replace")) or _FORBIDDEN_IN_VALUES.search(target) or " " in target:
        raise TransportError("the request line holds a character HTTP forbids")
    lines = [f"{method} {target} HTTP/1.1"]
    for name, value in headers:
        if not _TOKEN.fullmatch(name.encode("latin-1", "replace")):
            raise TransportError("a header name holds a character HTTP forbids")
        if _FORBIDDEN_IN_VALUES.search(value):
            raise TransportError(f"the {name[:40]} header holds a character HTTP forbids (a line break?)")
        lines.append(f"{name}: {value}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise TransportError("a header holds a character beyond Latin-1, which HTTP headers cannot carry") from None
    return head + body if body else head


def head_end(buffer: bytes | bytearray) -> int:
    """Where the head in `buffer` ends (just past its blank line), or -1 while it is incomplete."""
    crlf = buffer.find(b"\r\n\r\n")
    lf = buffer.find(b"\n\n")
    if lf != -1 and (crlf == -1 or lf + 2 < crlf + 4):
        return lf + 2
    return crlf + 4 if crlf != -1 else -1


def parse_head(data: bytes) -> Head:
    """The status line and header lines of an answer (without the blank line that ends them)."""
    lines = data.split(b"\n")
    status_line = lines[0].removesuffix(b"\r")
    matched = _STATUS_LINE.fullmatch(status_line)
    if matched is None:
        raise ProtocolError(f"a malformed status line: {status_line[:60]!r}")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        line = raw.removesuffix(b"\r")
        if not line:
            continue
        if line[0] in b" \t":
            raise ProtocolError("a header folded over two lines (obsolete, and refused)")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise ProtocolError(f"a malformed header line: {line[:60]!r}")
        if b"\r" in value or b"\x00" in value:
            raise ProtocolError(f"a header value with a forbidden character in {name[:40]!r}")
        key, text = name.decode("latin-1").lower(), value.strip(b" \t").decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return Head(int(matched.group(1)), int(matched.group(2)), headers)


def framing(head: Head, method: str, asked_to_close: bool) -> Framing:
    """How the body after `head` is delimited, as RFC 9112 section 6.3 orders the rules."""
    tokens = {token.strip().lower() for token in head.headers.get("connection", "").split(",")}
    keep_alive = head.minor_version >= 1 and "close" not in tokens and not asked_to_close
    if method == "HEAD" or head.status in _NO_BODY_STATUSES or head.status < 200:
        return Framing(NO_BODY, keep_alive=keep_alive)
    coding = head.headers.get("transfer-encoding")
    if coding is not None:
        if coding.strip().lower() != "chunked":
            raise ProtocolError(f"an unsupported transfer coding: {coding[:40]!r}")
        # A length beside chunked framing is how request smuggling starts: read the chunks, then close.
        return Framing(CHUNKED, keep_alive=keep_alive and "content-length" not in head.headers)
    declared = head.headers.get("content-length")
    if declared is not None:
        lengths = {value.strip() for value in declared.split(",")}
        if len(lengths) != 1 or not (length := lengths.pop()).isdigit() or not length.isascii():
            raise ProtocolError(f"a malformed Content-Length: {declared[:40]!r}")
        return Framing(BY_LENGTH, int(length), keep_alive)
    return Framing(UNTIL_CLOSE, keep_alive=False)


def chunk_size(line: bytes) -> int:
    """The size on a chunk's first line (extensions ignored)."""
    size = line.split(b";", 1)[0].strip(b" \t")
    if not size or len(size) > 16 or not set(size) <= _HEX:
        raise ProtocolError(f"a malformed chunk size: {line[:40]!r}")
    return int(size, 16)

"""A response body's Content-Encoding undone as it streams in, each layer's output bounded while it is produced.

httpx decodes a whole received chunk at once, so a few kilobytes of gzip inside gzip grow to gigabytes before
any size check sees them. Here every layer hands on at most `_PIECE` bytes at a time and stops at its limit.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

_PIECE = 64 * 1024
MAX_LAYERS = 3
_GZIP = frozenset({"gzip", "x-gzip"})
_KNOWN = _GZIP | {"deflate"}


class TooLarge(Exception):
    """A layer produced more than the limit."""


class Undecodable(Exception):
    """An encoding we do not decode, or a body that is not what its encoding says; the message says which."""


class BodyDecoder:
    """Undoes the encodings named in a Content-Encoding header, last applied first, none past `limit` bytes."""

    def __init__(self, content_encoding: str, limit: int) -> None:
        names = [name.strip().lower() for name in content_encoding.split(",")]
        names = [name for name in names if name and name != "identity"]
        unknown = [name for name in names if name not in _KNOWN]
        if unknown:
            raise Undecodable(f"answered in {unknown[0][:40]} content encoding, which web_fetch does not decode")
        if len(names) > MAX_LAYERS:
            raise Undecodable(f"answered with {len(names)} layers of content encoding (at most {MAX_LAYERS} are decoded)")
        self._layers = [_Inflate(name, limit) for name in reversed(names)]

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of one received chunk; TooLarge or Undecodable as soon as a layer goes wrong."""
        pieces: Iterable[bytes] = [data]
        for layer in self._layers:
            pieces = layer.feed_all(pieces)
        yield from pieces

    def finish(self) -> Iterator[bytes]:
        """What the layers still hold once the body has ended, each passed through the layers after it."""
        for index, layer in enumerate(self._layers):
            pieces: Iterable[bytes] = layer.finish()
            for later in self._layers[index + 1 :]:
                pieces = later.feed_all(pieces)
            yield from pieces


class _Inflate:
    """One gzip or deflate layer that produces at most `limit` bytes in all, `_PIECE` at a time."""

    def __init__(self, name: str, limit: int) -> None:
        self._name = name
        self._limit = limit
        self._produced = 0
        # deflate is meant to be zlib-wrapped, but some servers send it raw: tried as zlib first, as httpx does.
        self._raw_fallback = name == "deflate"
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if name in _GZIP else zlib.MAX_WBITS)

    def feed_all(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            yield from self._feed(piece)

    def finish(self) -> Iterator[bytes]:
        yield from self._feed(b"")
        yield self._count(self._zlib.flush())

    def _feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._zlib.decompress(data, _PIECE)
            except zlib.error:
                if not self._raw_fallback:
                    raise Undecodable(f"sent a body that is not valid {self._name}") from None
                self._raw_fallback = False
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            if data:
                self._raw_fallback = False
            data = self._zlib.unconsumed_tail
            yield self._count(out)
            # A full piece may leave more output inside zlib even when all the input is taken.
            if not data and len(out) < _PIECE:
                return

    def _count(self, out: bytes) -> bytes:
        self._produced += len(out)
        if self._produced > self._limit:
            raise TooLarge
        return out

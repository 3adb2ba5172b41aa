"""The failures a request can end in, and the time limits that bound it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection, for the next bytes of an answer, and for a write to drain; None waits forever."""

    connect: float | None = 10.0
    read: float | None = 30.0
    write: float | None = 30.0


class TransportError(Exception):
    """A request that did not get a complete answer."""


class ConnectError(TransportError):
    """No connection: the name did not resolve, the port refused, TLS failed, or a proxy refused the tunnel."""


class TransportTimeout(TransportError):
    """A time limit ran out; `phase` says which: "connect", "read" or "write"."""

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase


class ProtocolError(TransportError):
    """The server broke HTTP: a malformed answer, oversized headers, or a close before the answer was complete."""

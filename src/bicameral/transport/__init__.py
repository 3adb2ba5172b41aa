"""A small HTTP/1.1 client for the services every message talks to: the Bot API and the model APIs."""

from .client import HttpClient
from .connection import Response
from .errors import ConnectError, ProtocolError, Timeouts, TransportError, TransportTimeout
from .multipart import encode_multipart
from .proxies import Proxies, ProxyRoute

__all__ = [
    "ConnectError",
    "HttpClient",
    "ProtocolError",
    "Proxies",
    "ProxyRoute",
    "Response",
    "Timeouts",
    "TransportError",
    "TransportTimeout",
    "encode_multipart",
]

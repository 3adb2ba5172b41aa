"""httpx as the fixed services every message talks to (the Bot API, the model APIs) use it, routed by the proxy
variables: `proxies` reads them (without importing httpx), `client` sends."""

from .proxies import Proxies, ProxyRoute

__all__ = ["Proxies", "ProxyRoute"]

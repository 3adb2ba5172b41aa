"""Which proxy a request to a fixed service goes through, read from the proxy variables the way curl reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from urllib.parse import unquote, urlsplit

from bicameral.errors import ConfigError

IPAddress = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

# A proxy URL without a port: port 80 for http://, as httpx and requests read it (curl assumes 1080),
# and the SOCKS port, 1080, for socks5:// and socks5h://.
_DEFAULT_PORTS = {"http": 80, "socks5": 1080, "socks5h": 1080}


@dataclass(frozen=True)
class ProxyRoute:
    """A proxy: its scheme (http, socks5 or socks5h), host and port, and the credentials to give it, if any."""

    scheme: str
    host: str
    port: int
    # Credentials stay out of reprs, so a route logged or shown in a failure never leaks them.
    auth: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The proxy's URL without its credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True)
class _Exemption:
    """One NO_PROXY entry: a domain (with its subdomains) or an address block, optionally on one port only."""

    domain: str | None = None
    network: Network | None = None
    port: int | None = None

    def covers(self, host: str, address: IPAddress | None, port: int) -> bool:
        """Whether a request to host:port goes direct because of this entry."""
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address is not None and address in self.network
        # Names are never resolved: a domain entry matches names only, an address entry addresses only.
        return address is None and self.domain is not None and (host == self.domain or host.endswith("." + self.domain))


@dataclass(frozen=True)
class Proxies:
    """The proxy for each scheme and the hosts that bypass it; `for_url` answers per request.

    A socks5:// proxy is handed the name, as with socks5h://: httpx lets the proxy resolve it either way.
    """

    http: ProxyRoute | None = None
    https: ProxyRoute | None = None
    exemptions: tuple[_Exemption, ...] = ()
    bypass_all: bool = False

    @classmethod
    def none(cls) -> Proxies:
        """Every request goes direct."""
        return cls()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Proxies:
        """HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY, each lower-case spelling winning over upper-case."""
        every = _variable(environ, "all_proxy")
        https = _variable(environ, "https_proxy") or every
        http = _variable(environ, "http_proxy") or every
        exemptions, bypass_all = _exemptions(_variable(environ, "no_proxy"))
        return cls(
            http=_route(*http) if http else None,
            https=_route(*https) if https else None,
            exemptions=exemptions,
            bypass_all=bypass_all,
        )

    def for_url(self, scheme: str, host: str, port: int) -> ProxyRoute | None:
        """The proxy a request to scheme://host:port goes through, or None to connect directly."""
        route = {"http": self.http, "https": self.https}.get(scheme.lower())
        if route is None or self.bypass_all:
            return None
        name = _normal_host(host)
        address = _address(name)
        if any(exemption.covers(name, address, port) for exemption in self.exemptions):
            return None
        return route


def _variable(environ: Mapping[str, str], lower: str) -> tuple[str, str] | None:
    """The (name, value) of a proxy variable as curl picks it: lower-case first; an empty value counts as unset."""
    for name in (lower, lower.upper()):
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _route(variable: str, value: str) -> ProxyRoute:
    """The route a proxy URL describes; a scheme other than http, socks5 and socks5h is refused by the variable's name."""
    parts = urlsplit(value if "://" in value else "http://" + value)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        # The value itself is not repeated: it may hold a password.
        raise ConfigError(
            f"{variable} names a {parts.scheme}:// proxy; only http://, socks5:// and socks5h:// proxies are supported"
        )
    if not parts.hostname:
        raise ConfigError(f"{variable} has no proxy host; expected {scheme}://host:port")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ConfigError(f"{variable} has an invalid proxy port; expected {scheme}://host:port") from None
    auth = None if parts.username is None else (unquote(parts.username), unquote(parts.password or ""))
    return ProxyRoute(scheme, parts.hostname, port, auth)


def _exemptions(variable: tuple[str, str] | None) -> tuple[tuple[_Exemption, ...], bool]:
    """The NO_PROXY entries, and whether `*` sends everything direct; entries that mean nothing are skipped."""
    if variable is None:
        return (), False
    entries = [entry.strip() for entry in variable[1].split(",")]
    if "*" in entries:
        return (), True
    parsed = (_exemption(entry) for entry in entries if entry)
    return tuple(exemption for exemption in parsed if exemption is not None), False


def _exemption(entry: str) -> _Exemption | None:
    """One NO_PROXY entry: `10.0.0.0/8`, `127.0.0.1`, `::1`, `[::1]:8080`, `example.com`, `.example.com:443`."""
    entry = entry.lower()
    if "/" in entry:
        try:
            return _Exemption(network=ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            return None
    host, port = entry, None
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        if rest:
            port = _port(rest[1:]) if rest.startswith(":") else None
            if port is None:
                return None
    elif entry.count(":") == 1:  # more than one colon is an IPv6 address without a port
        host, _, port_text = entry.partition(":")
        port = _port(port_text)
        if port is None:
            return None
    address = _address(host)
    if address is not None:
        return _Exemption(network=ip_network(address), port=port)
    # `*.example.com` and `.example.com` mean what `example.com` means: the domain and everything under it.
    domain = _normal_host(host.removeprefix("*").lstrip("."))
    return _Exemption(domain=domain, port=port) if domain else None


def _port(text: str) -> int | None:
    """A port number, or None when the text is not one."""
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def _normal_host(host: str) -> str:
    """A host as compared: lower-case, without IPv6 brackets or the root's trailing dot."""
    return host.strip("[]").rstrip(".").lower()


def _address(host: str) -> IPAddress | None:
    """The address an IP-literal host names, None for a name."""
    try:
        return ip_address(host)
    except ValueError:
        return None

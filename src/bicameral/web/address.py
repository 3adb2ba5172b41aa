"""Which addresses web_fetch and the browser may reach: every numeric spelling normalised, public unicast only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

IPAddress = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

_NUMERIC_PART = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_CGNAT = ip_network("100.64.0.0/10")
_NAT64 = ip_network("64:ff9b::/96")
_NAT64_LOCAL = ip_network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ip_network("::/96")
# Instance-metadata endpoints of the big clouds; most are link-local or private anyway, named for a clear refusal.
_METADATA = frozenset(
    ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "192.0.0.192")
)
# Ports below 1024 other than the web's own mostly belong to internal services (ssh, smtp, ...).
_WEB_PORTS = frozenset({80, 443})


class AddressRefused(ValueError):
    """A URL or address web_fetch will not reach; the message says why in a sentence."""


def numeric_ipv4(host: str) -> IPv4Address | None:
    """The address a numeric host means to inet_aton (127.1, 0x7f.1, 0177.0.0.1, 2130706433), or None for a name."""
    parts = host.lower().split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        return None
    values: list[int] = []
    for part in parts:
        if part.startswith("0x"):
            values.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                raise AddressRefused(f"{host!r} is not a valid numeric address")
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *head, last = values
    last_bytes = 4 - len(head)
    if any(v > 255 for v in head) or last >= 256**last_bytes:
        raise AddressRefused(f"{host!r} is not a valid numeric address")
    number = 0
    for v in head:
        number = number * 256 + v
    return IPv4Address(number * 256**last_bytes + last)


def literal_address(host: str) -> IPAddress | None:
    """The address an IP-literal host names (any IPv4 spelling, or IPv6 without brackets), None for a name."""
    if ":" in host:
        try:
            return IPv6Address(host)
        except ValueError:
            raise AddressRefused(f"{host!r} is not a valid IPv6 address") from None
    return numeric_ipv4(host)


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, 6to4, Teredo, NAT64), which is where it leads."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or address in _NAT64_LOCAL or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _kind(address: IPAddress) -> str | None:
    """Why the address is not a public unicast one, or None when it is."""
    if address in _METADATA:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, IPv4Address) and address in _CGNAT:
        return "a carrier-grade NAT (shared) address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "not a public address"
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """Public unicast addresses only, but for the owner's allowances (BICAMERAL_WEB_ALLOW_HOSTS): networks in `allowed`,
    and hosts named in `allowed_names` (lower case, no trailing dot) whatever they resolve to. Cloud metadata addresses
    stay refused through every allowance."""

    allowed: tuple[Network, ...] = ()
    allowed_ports: frozenset[int] = field(default=_WEB_PORTS)
    allowed_names: frozenset[str] = frozenset()

    def refusal(self, address: IPAddress, name: str | None = None) -> str | None:
        """A sentence saying why the address is refused, or None when it may be reached; `name`: the host name as written
        in the URL when the address came from resolving it (None for an address written as such)."""
        if address in _METADATA:
            return f"{address} is a cloud metadata address"
        if isinstance(address, IPv6Address) and embedded_ipv4(address) in _METADATA:
            return _leads(address)
        if name is not None and name.rstrip(".").lower() in self.allowed_names:
            return None
        if self._exempt(address):
            return None
        if isinstance(address, IPv6Address):
            inner = embedded_ipv4(address)
            if inner is not None:
                return _leads(address)  # an allowance never extends to an address hidden inside another
            if address.scope_id:
                return f"{address} has a zone, so it only means something on this machine"
        kind = _kind(address)
        return f"{address} is {kind}" if kind else None

    def _exempt(self, address: IPAddress) -> bool:
        return any(address in net for net in self.allowed if net.version == address.version)

    def port_refusal(self, port: int) -> str | None:
        if port in self.allowed_ports or port >= 1024:
            return None
        return f"port {port} is refused (only 80, 443 and ports from 1024 up are fetched)"


def _leads(address: IPv6Address) -> str | None:
    """Why an IPv6 address carrying an IPv4 one is refused (judged by the one it carries), or None when that is public."""
    inner = embedded_ipv4(address)
    kind = _kind(inner) if inner is not None else None
    return f"{address} leads to {inner}, {kind}" if kind else None


def allowance_policy(entries: tuple[str, ...]) -> AddressPolicy:
    """The policy for BICAMERAL_WEB_ALLOW_HOSTS's entries (checked by Settings): networks and host names."""
    networks: list[Network] = []
    names: set[str] = set()
    for entry in entries:
        try:
            networks.append(ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.rstrip(".").lower())
    return AddressPolicy(allowed=tuple(networks), allowed_names=frozenset(names))

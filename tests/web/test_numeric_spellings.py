"""Our reading of numeric hosts matches the C library's inet_aton, which is what a resolver would connect to."""

from __future__ import annotations

import socket
from ipaddress import IPv4Address

from hypothesis import given, settings
from hypothesis import strategies as st

from bicameral.web.address import AddressRefused, numeric_ipv4


def _spelled(value: int) -> st.SearchStrategy[str]:
    return st.sampled_from([str(value), f"0{value:o}", f"0x{value:x}", f"0X{value:X}", f"00{value:o}"])


parts = st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=4).flatmap(
    lambda values: st.tuples(*(_spelled(v) for v in values))
)


@settings(max_examples=400, deadline=None)
@given(parts)
def test_every_numeric_spelling_means_what_inet_aton_means(spelling):
    host = ".".join(spelling)
    try:
        expected: IPv4Address | None = IPv4Address(socket.inet_aton(host))
    except OSError:
        expected = None
    try:
        ours = numeric_ipv4(host)
    except AddressRefused:
        ours = None
    assert ours == expected, host

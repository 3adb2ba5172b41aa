"""Every spelling of a private, loopback or metadata address, and every URL trick, is refused with a clear reason."""

from __future__ import annotations

import pytest

from bicameral.tools.web import FetchArgs, WebFetch
from bicameral.web.fetch import WebFetcher
from tests.web.conftest import Resolver

PUBLIC = "93.184.216.34"

HOSTILE = [
    # loopback in every spelling
    ("http://127.0.0.1/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://0x7f.0x0.0x0.0x1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.0.1/", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://127.0.0.1../", "loopback"),
    ("http://127.255.255.254:8080/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "leads to 127.0.0.1, a loopback address"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]/", "loopback"),
    ("http://[2002:7f00:1::]/", "loopback"),  # 6to4 around 127.0.0.1
    ("http://localhost/", "loopback"),
    ("http://LOCALHOST./", "loopback"),
    # unspecified
    ("http://0/", "unspecified"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://[::]/", "unspecified"),
    # private networks
    ("http://10.0.0.1/", "private"),
    ("http://012.0.0.1/", "private"),  # octal 10.0.0.1
    ("http://172.16.5.4/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://3232235777/", "private"),  # 192.168.1.1
    ("http://[fc00::1]/", "private"),
    ("http://[::ffff:10.0.0.1]/", "private"),
    ("http://intranet.test/", "private"),
    # cloud metadata and link-local
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://2852039166/", "cloud metadata"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "cloud metadata"),
    ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
    ("http://[64:ff9b::a9fe:a9fe]/", "cloud metadata"),  # NAT64 around it
    ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://100.100.100.200/", "cloud metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata"),
    ("http://169.254.1.1/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    # carrier-grade NAT, multicast, reserved
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://255.255.255.255/", "refused"),
    # a name with one bad answer among good ones (either could be used later)
    ("http://mixed.test/", "loopback"),
    # userinfo tricks
    ("http://good.com@127.0.0.1/", "user name or password"),
    ("http://user:pass@example.com/", "user name or password"),
    ("http://example.com@evil.test/", "user name or password"),
    ("http://127.0.0.1#@example.com/", "refused"),
    ("http://127.0.0.1:80\\@example.com/", "backslashes"),
    # schemes and ports
    ("file:///etc/passwd", "only http and https"),
    ("gopher://example.com:70/_GET", "only http and https"),
    ("ftp://example.com/", "only http and https"),
    ("javascript:alert(1)", "only http and https"),
    ("/just/a/path", "only http and https"),
    ("http://example.com:22/", "port 22"),
    ("http://example.com:25/", "port 25"),
    # malformed
    ("http://256.1.1.1/", "not a valid numeric address"),
    ("http://0x100.0.0.1/", "not a valid numeric address"),
    ("http://09.0.0.1/", "not a valid numeric address"),
    ("http://exa mple.com/", "spaces"),
    ("http://example.com/\r\nHost: 127.0.0.1", "control characters"),
    ("http:///nohost", "no host"),
]


def _resolver() -> Resolver:
    return Resolver(
        {
            "localhost": [["127.0.0.1", "::1"]],
            "intranet.test": [["10.1.2.3"]],
            "metadata.google.internal": [["169.254.169.254"]],
            "mixed.test": [[PUBLIC, "127.0.0.1"]],
            "example.com": [[PUBLIC]],
            "evil.test": [["127.0.0.1"]],
        }
    )


@pytest.mark.parametrize(("url", "reason"), HOSTILE)
async def test_each_hostile_url_is_refused_with_its_reason(url, reason, ctx):
    resolver = _resolver()
    result = await WebFetch(WebFetcher(resolve=resolver)).run(FetchArgs(url=url), ctx)
    assert result.is_error
    assert reason in result.content
    assert result.content.startswith("refused ")


async def test_numeric_hosts_never_reach_the_resolver(ctx):
    resolver = _resolver()
    tool = WebFetch(WebFetcher(resolve=resolver))
    for url in ("http://2130706433/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/", "http://127.1./"):
        assert (await tool.run(FetchArgs(url=url), ctx)).is_error
    assert resolver.calls == []


async def test_a_name_that_does_not_resolve_says_so(ctx):
    result = await WebFetch(WebFetcher(resolve=_resolver())).run(FetchArgs(url="http://nowhere.test/"), ctx)
    assert result.is_error and result.content == "could not resolve nowhere.test"
